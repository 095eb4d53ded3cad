"""First-last-frame-to-video and video-to-video against diffusers on tiny random checkpoints.

FLF2V: diffusers' WanImageToVideoPipeline with `last_image`, on a Wan 2.1 FLF2V-shaped model
(CLIP tokens of both frames under its image position embedding) and a Wan 2.2 I2V A14B one
(image latents only). V2V: diffusers' WanVideoToVideoPipeline on a Wan 2.1 T2V model at two
strengths; diffusers draws the noise it mixes into the video from its generator, and wanjax
gets the same draw as `initial_latents`. Same inputs on both sides, diffusers' grid
(sigma_schedule=diffusers); tolerances as the other pipeline parity tests: final latents within
1e-4 of max|ref| in fp32, uint8 frames within 1 level. diffusers splits image from text tokens
at a hard-coded 512 text tokens, so max_sequence_length is 512 for the image models.
"""

import numpy as np
import pytest
import torch
from PIL import Image

from wanjax.application.container import build_container
from wanjax.application.presets import resolve_config

PROMPT, NEGATIVE = "the cat turns its head", "static"
SIZE = dict(height=32, width=48, num_frames=9)
LATENT_SHAPE = (1, 16, 3, 4, 6)
GUIDANCE, GUIDANCE_LOW = 5.0, 3.0
NOISE_SEED = 11


def _pixels(seed: int, shape: tuple[int, ...]) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8)  # not the video size


def _noise() -> torch.Tensor:
    """What diffusers' randn_tensor draws from `torch.Generator().manual_seed(NOISE_SEED)` on CPU."""
    return torch.randn(*LATENT_SHAPE, generator=torch.Generator().manual_seed(NOISE_SEED))


def _service(folder, overrides):
    config = resolve_config(str(folder), {"dtype": "float32", "sigma_schedule": "diffusers", **overrides})
    return config, build_container(config).service()


def _reference(pipe, common, noise):
    """Final latents and uint8 frames of two diffusers runs, `noise()` giving each its noise arguments."""
    latents = pipe(**common, **noise(), output_type="latent").frames.numpy()
    frames = (np.asarray(pipe(**common, **noise(), output_type="np").frames) * 255).round()
    return latents, frames


def _ours(service, request):
    latents = service.generate(request, initial_latents=_noise().numpy(), output_type="latent").array
    frames = service.generate(request, initial_latents=_noise().numpy()).array
    return latents, frames


def _assert_close(ours, reference, label):
    (latents, frames), (expected_latents, expected_frames) = ours, reference
    error = np.max(np.abs(latents - expected_latents)) / np.max(np.abs(expected_latents))
    levels = np.max(np.abs(frames.astype(int) - expected_frames.astype(int)))
    print(f"{label}: latents {error:.2e} of max|ref|, frames {levels} level(s)")
    assert error <= 1e-4, f"relative error {error:.2e}"
    assert levels <= 1


@pytest.mark.parametrize(
    ("checkpoint", "reference_kwargs", "overrides"),
    [
        ("tiny_flf2v_checkpoint", {}, {}),
        ("tiny_i2v_a14b_checkpoint", {"guidance_scale_2": GUIDANCE_LOW}, {"guidance_scale_low": str(GUIDANCE_LOW)}),
    ],
    ids=["wan21-flf2v", "wan22-i2v-a14b"],
)
def test_first_last_frame_matches_diffusers(request, checkpoint, reference_kwargs, overrides):
    from diffusers import WanImageToVideoPipeline

    folder = request.getfixturevalue(checkpoint)
    first, last = _pixels(7, (40, 56, 3)), _pixels(8, (24, 40, 3))
    steps = 4
    pipe = WanImageToVideoPipeline.from_pretrained(folder)
    pipe.set_progress_bar_config(disable=True)
    common = dict(
        image=Image.fromarray(first), last_image=Image.fromarray(last), prompt=PROMPT, negative_prompt=NEGATIVE,
        **SIZE, num_inference_steps=steps, guidance_scale=GUIDANCE, max_sequence_length=512, **reference_kwargs,
    )  # fmt: skip
    reference = _reference(pipe, common, noise=lambda: {"latents": _noise()})

    config, service = _service(folder, {"max_sequence_length": "512", **overrides})
    ask = config.request(PROMPT, negative_prompt=NEGATIVE, **SIZE, num_inference_steps=steps,
                         guidance_scale=GUIDANCE, image=first, last_image=last)  # fmt: skip
    _assert_close(_ours(service, ask), reference, f"FLF2V {checkpoint}")


@pytest.fixture(scope="module")
def v2v_pipelines(tiny_checkpoint):
    """diffusers' WanVideoToVideoPipeline and wanjax's service on the tiny Wan 2.1 T2V checkpoint."""
    from diffusers import WanPipeline, WanVideoToVideoPipeline

    t2v = WanPipeline.from_pretrained(tiny_checkpoint)
    parts = ("tokenizer", "text_encoder", "transformer", "vae", "scheduler")
    pipe = WanVideoToVideoPipeline(**{name: getattr(t2v, name) for name in parts})
    pipe.set_progress_bar_config(disable=True)
    return pipe, _service(tiny_checkpoint, {})


@pytest.mark.parametrize(("strength", "steps"), [(0.5, 6), (0.8, 6)])
def test_video_to_video_matches_diffusers(v2v_pipelines, strength, steps):
    pipe, (config, service) = v2v_pipelines
    video = _pixels(5, (SIZE["num_frames"], 40, 56, 3))
    common = dict(
        video=[Image.fromarray(frame) for frame in video], prompt=PROMPT, negative_prompt=NEGATIVE,
        height=SIZE["height"], width=SIZE["width"], num_inference_steps=steps, guidance_scale=GUIDANCE,
        strength=strength,
    )  # fmt: skip
    reference = _reference(pipe, common, noise=lambda: {"generator": torch.Generator().manual_seed(NOISE_SEED)})

    ask = config.request(PROMPT, negative_prompt=NEGATIVE, **SIZE, num_inference_steps=steps,
                         guidance_scale=GUIDANCE, video=video, strength=strength)  # fmt: skip
    _assert_close(_ours(service, ask), reference, f"V2V strength {strength}, {steps} steps")
