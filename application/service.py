"""The generation service: load once, generate many. Every entrypoint and embedding calls this."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import numpy as np

from wanjax.domain.errors import InvalidRequestError
from wanjax.domain.latents import LatentGeometry
from wanjax.domain.plan import plan_sampling
from wanjax.domain.ports import Denoiser, StepCallback, TextEncoder, VideoAutoencoder
from wanjax.domain.requests import GenerationRequest
from wanjax.domain.specs import TransformerSpec, VaeSpec
from wanjax.domain.tracing import TimingTrace

OUTPUT_TYPES = ("frames", "latent")


@attrs.frozen
class GenerationResult:
    """Frames [B, F, H, W, 3] uint8, or (output_type "latent") latents [B, C, F', H', W'] float32."""

    array: np.ndarray
    output_type: str
    trace: TimingTrace


@attrs.frozen(kw_only=True)
class ModelComponents:
    """Lazily built components; each callable is a container provider (built once)."""

    transformer_spec: TransformerSpec
    vae_spec: VaeSpec
    num_experts: int
    boundary_ratio: float | None
    text_encoder: Callable[[], TextEncoder]
    denoiser: Callable[[], Denoiser]
    autoencoder: Callable[[], VideoAutoencoder]


class GenerationService:
    """Turns validated requests into videos with one loaded model."""

    def __init__(self, components: ModelComponents, *, max_sequence_length: int) -> None:
        self._components = components
        self._max_sequence_length = max_sequence_length
        self._loaded: tuple[TextEncoder, Denoiser, VideoAutoencoder] | None = None

    def geometry(self, request: GenerationRequest) -> LatentGeometry:
        """The latent shape of `request`; raises before any load if the model cannot make it."""
        return LatentGeometry.of(request, self._components.transformer_spec, self._components.vae_spec)

    def load(self, trace: TimingTrace | None = None) -> None:
        if self._loaded is not None:
            return
        with (trace or TimingTrace()).span("load"):
            c = self._components
            self._loaded = (c.text_encoder(), c.denoiser(), c.autoencoder())

    def generate(
        self,
        request: GenerationRequest,
        *,
        initial_latents: np.ndarray | None = None,
        output_type: str = "frames",
        on_step: StepCallback | None = None,
    ) -> GenerationResult:
        """`initial_latents` are noise in diffusers' layout [B, C, F', H', W'] (else drawn from the seed)."""
        if output_type not in OUTPUT_TYPES:
            raise InvalidRequestError(f"output_type={output_type!r}: must be one of {', '.join(OUTPUT_TYPES)}")
        geometry = self.geometry(request)
        if initial_latents is not None:
            geometry.check_diffusers_latents(initial_latents)
        c = self._components
        plan = plan_sampling(request, num_experts=c.num_experts, model_boundary_ratio=c.boundary_ratio)
        trace = TimingTrace()
        self.load(trace)
        assert self._loaded is not None
        text_encoder, denoiser, autoencoder = self._loaded

        with trace.span("conditioning"):
            prompts = [request.prompt] + ([request.negative_prompt] if request.uses_guidance else [])
            embeddings = text_encoder.encode(prompts, self._max_sequence_length)
            context = embeddings[:1]
            negative_context = embeddings[1:] if request.uses_guidance else None
            if initial_latents is None:
                latents: Any = denoiser.noise(request.seed, geometry.shape)
            else:
                latents = geometry.from_diffusers_layout(initial_latents)

        with trace.span("compile"):
            denoiser.prepare(latents, plan, context, negative_context)
        with trace.span("denoise"):
            latents = denoiser.denoise(latents, plan, context, negative_context, on_step)
            latents = np.asarray(latents) if output_type == "latent" else latents
        if output_type == "latent":
            return GenerationResult(geometry.to_diffusers_layout(latents), output_type, trace)

        with trace.span("compile"):
            autoencoder.prepare(latents)
        with trace.span("vae_decode"):
            frames = autoencoder.decode_to_uint8(latents)
        return GenerationResult(frames, output_type, trace)
