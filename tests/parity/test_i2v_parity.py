"""Image-to-video against diffusers' WanImageToVideoPipeline on tiny random checkpoints.

Wan 2.1 I2V (CLIP image tokens + image latents as extra channels) and Wan 2.2 I2V A14B
(two experts, image latents only). Same image, prompt and initial latents on both sides.
Tolerances as in the T2V parity: final latents within 1e-4 of max|ref| in fp32, uint8
frames within 1 level. diffusers splits image from text tokens at a hard-coded 512 text
tokens, so max_sequence_length is 512 here.
"""

import numpy as np
import pytest
import torch
from PIL import Image

from wanjax.application.container import build_container
from wanjax.application.presets import resolve_config

PROMPT, NEGATIVE = "the cat turns its head", "static"
SIZE = dict(height=32, width=48, num_frames=9)
STEPS, GUIDANCE, GUIDANCE_LOW = 4, 5.0, 3.0


def _image() -> np.ndarray:
    return np.random.default_rng(7).integers(0, 256, (40, 56, 3), dtype=np.uint8)  # not the video size


def _noise():
    return torch.randn(1, 16, 3, 4, 6, generator=torch.Generator().manual_seed(11))


def _compare(folder, reference_kwargs, overrides):
    from diffusers import WanImageToVideoPipeline

    pipe = WanImageToVideoPipeline.from_pretrained(folder)
    pipe.set_progress_bar_config(disable=True)
    common = dict(
        image=Image.fromarray(_image()), prompt=PROMPT, negative_prompt=NEGATIVE, **SIZE,
        num_inference_steps=STEPS, guidance_scale=GUIDANCE, max_sequence_length=512, **reference_kwargs,
    )  # fmt: skip
    expected_latents = pipe(**common, latents=_noise(), output_type="latent").frames.numpy()
    expected_frames = (np.asarray(pipe(**common, latents=_noise(), output_type="np").frames) * 255).round()

    config = resolve_config(
        str(folder),
        {"dtype": "float32", "sigma_schedule": "diffusers", "max_sequence_length": "512", **overrides},
    )
    service = build_container(config).service()
    request = config.request(PROMPT, negative_prompt=NEGATIVE, **SIZE, num_inference_steps=STEPS,
                             guidance_scale=GUIDANCE, image=_image())  # fmt: skip
    latents = service.generate(request, initial_latents=_noise().numpy(), output_type="latent").array
    frames = service.generate(request, initial_latents=_noise().numpy()).array

    error = np.max(np.abs(latents - expected_latents)) / np.max(np.abs(expected_latents))
    assert error <= 1e-4, f"relative error {error:.2e}"
    assert np.max(np.abs(frames.astype(int) - expected_frames.astype(int))) <= 1


def test_wan21_i2v_matches_diffusers(tiny_i2v_checkpoint):
    _compare(tiny_i2v_checkpoint, {}, {})


def test_wan22_i2v_a14b_matches_diffusers(tiny_i2v_a14b_checkpoint):
    _compare(tiny_i2v_a14b_checkpoint, {"guidance_scale_2": GUIDANCE_LOW}, {"guidance_scale_low": str(GUIDANCE_LOW)})


def test_image_is_required_and_text_models_refuse_one(tiny_i2v_checkpoint, tiny_checkpoint):
    from wanjax.domain.errors import InvalidRequestError

    i2v = resolve_config(str(tiny_i2v_checkpoint), {"dtype": "float32"})
    with pytest.raises(InvalidRequestError, match="image-to-video model: give the first frame"):
        build_container(i2v).service().generate(i2v.request(PROMPT, **SIZE))
    t2v = resolve_config(str(tiny_checkpoint), {"dtype": "float32"})
    with pytest.raises(InvalidRequestError, match="takes no image"):
        build_container(t2v).service().generate(t2v.request(PROMPT, **SIZE, image=_image()))
