"""Hand-written fakes for the ports; each records what it was asked."""

from __future__ import annotations

from typing import Any

import numpy as np

from wanjax.domain.caching.report import CacheRunReport
from wanjax.domain.plan import SamplingPlan
from wanjax.domain.ports import Denoised


class FakeTextEncoder:
    def __init__(self, dim: int = 8) -> None:
        self.dim = dim
        self.calls: list[list[str]] = []

    def encode(self, prompts, max_sequence_length):
        self.calls.append(list(prompts))
        codes = np.array([[len(p)] for p in prompts], dtype=np.float32)
        return np.broadcast_to(codes[:, :, None], (len(prompts), max_sequence_length, self.dim)).copy()


class OneRunSessions:
    """A fake denoiser's `session`: each of its runs is the fake's own `prepare` / `denoise` (the
    fakes record those); `sessions` counts the sessions opened."""

    sessions = 0

    def session(self, plan, context, negative_context, *, compiled_for=None):
        self.sessions += 1
        return _OneRunSession(self, plan, context, negative_context, compiled_for or plan)


class _OneRunSession:
    def __init__(self, denoiser, plan, context, negative_context, compiled_for) -> None:
        self.denoiser, self.plan, self.compiled_for = denoiser, plan, compiled_for
        self.context, self.negative_context = context, negative_context

    def prepare(self, latents, conditioning=None, frames=None):
        assert frames is None, "the fakes run plans, not Diffusion Forcing schedules"
        self.denoiser.prepare(latents, self.compiled_for, self.context, self.negative_context, conditioning)

    def denoise(self, latents, on_step=None, conditioning=None, frames=None):
        assert frames is None, "the fakes run plans, not Diffusion Forcing schedules"
        return self.denoiser.denoise(latents, self.plan, self.context, self.negative_context, on_step, conditioning)


class FakeDenoiser(OneRunSessions):
    """Returns the noise scaled by the number of steps; records plans and conditioning shapes."""

    def __init__(self) -> None:
        self.plans: list[SamplingPlan] = []
        self.contexts: list[tuple[tuple[int, ...], tuple[int, ...] | None]] = []
        self.prepared = 0
        self.conditionings: list[Any] = []

    def noise(self, seed, shape):
        return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)

    def prepare(self, latents, plan, context, negative_context, conditioning=None):
        self.prepared += 1

    def denoise(self, latents, plan, context, negative_context, on_step=None, conditioning=None):
        self.plans.append(plan)
        self.conditionings.append(conditioning)
        self.contexts.append((context.shape, None if negative_context is None else negative_context.shape))
        for i in range(plan.num_steps):
            if on_step:
                on_step(i + 1, plan.num_steps)
        return Denoised(np.asarray(latents) * plan.num_steps, CacheRunReport.of(plan.num_steps, plan.uses_guidance))


class FakeAutoencoder:
    def __init__(self) -> None:
        self.decoded: list[tuple[int, ...]] = []
        self.encoded: list[tuple[tuple[int, ...], int, int, int]] = []

    def encode_image(self, pixels, height, width, num_frames, last_pixels=None):
        self.encoded.append((pixels.shape, height, width, num_frames))
        return np.ones((1, (num_frames - 1) // 4 + 1, height // 8, width // 8, 16), np.float32)

    def encode_frames(self, frames, height, width):
        self.encoded.append((frames.shape, height, width, len(frames)))
        return np.ones((1, (len(frames) - 1) // 4 + 1, height // 8, width // 8, 16), np.float32)

    def prepare(self, latents: Any) -> None:
        pass

    def decode_to_uint8(self, latents):
        b, f, h, w, _ = latents.shape
        self.decoded.append(latents.shape)
        return np.zeros((b, (f - 1) * 4 + 1, h * 8, w * 8, 3), np.uint8)


def fake_service(
    build_denoiser, *, image_conditioning=None, max_sequence_length: int = 5, lora_check=None, lora_switch=None
):
    """A GenerationService over the fakes, its denoiser built by `build_denoiser()`; a text-to-video
    model unless `image_conditioning` says otherwise; requests may carry LoRAs where `lora_check`
    (called with each request's LoRAs per expert) is given; runs apply them with `lora_switch`."""
    from wanjax.application.service import GenerationService, ModelComponents
    from wanjax.domain.conditioning import ImageConditioning
    from wanjax.domain.settings import TextEncoderSettings
    from wanjax.domain.specs import TransformerSpec, VaeSpec

    components = ModelComponents(
        transformer_spec=TransformerSpec(), vae_spec=VaeSpec(), num_experts=1, boundary_ratio=None,
        image_conditioning=image_conditioning or ImageConditioning.NONE, text_encoder=FakeTextEncoder,
        denoiser=build_denoiser, autoencoder=FakeAutoencoder, image_encoder=lambda: None, lora_check=lora_check,
        lora_switch=lambda: lora_switch,
    )  # fmt: skip
    return GenerationService(components, TextEncoderSettings(max_sequence_length=max_sequence_length))
