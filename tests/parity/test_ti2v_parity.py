"""Wan 2.2 TI2V-5B against diffusers on a tiny random checkpoint: the Wan 2.2 VAE and
per-token timesteps, text-only (WanPipeline) and with an image (WanImageToVideoPipeline,
first latent frame replaced, its tokens at timestep 0). Tolerances as in the T2V parity:
final latents within 1e-4 of max|ref| in fp32, uint8 frames within 1 level.
"""

import numpy as np
import pytest
import torch
from PIL import Image

from wanjax.application.container import build_container
from wanjax.application.presets import resolve_config

PROMPT, NEGATIVE = "waves rolling onto a beach", "blurry"
SIZE = dict(height=32, width=64, num_frames=9)
STEPS, GUIDANCE, MAX_LEN = 4, 5.0, 16


def _noise():
    return torch.randn(1, 48, 3, 2, 4, generator=torch.Generator().manual_seed(13))


def _image() -> np.ndarray:
    return np.random.default_rng(3).integers(0, 256, (30, 70, 3), dtype=np.uint8)


@pytest.fixture(scope="module")
def service_and_config(tiny_ti2v_checkpoint):
    config = resolve_config(
        str(tiny_ti2v_checkpoint),
        {"dtype": "float32", "sigma_schedule": "diffusers", "max_sequence_length": str(MAX_LEN)},
    )
    return build_container(config).service(), config


@pytest.mark.parametrize("with_image", [False, True], ids=["text", "image"])
def test_matches_diffusers(tiny_ti2v_checkpoint, service_and_config, with_image):
    from diffusers import WanImageToVideoPipeline, WanPipeline

    pipeline_class = WanImageToVideoPipeline if with_image else WanPipeline
    pipe = pipeline_class.from_pretrained(tiny_ti2v_checkpoint)
    pipe.set_progress_bar_config(disable=True)
    image_kwargs = {"image": Image.fromarray(_image())} if with_image else {}
    common = dict(prompt=PROMPT, negative_prompt=NEGATIVE, **SIZE, num_inference_steps=STEPS,
                  guidance_scale=GUIDANCE, max_sequence_length=MAX_LEN, **image_kwargs)  # fmt: skip
    expected_latents = pipe(**common, latents=_noise(), output_type="latent").frames.numpy()
    expected_frames = (np.asarray(pipe(**common, latents=_noise(), output_type="np").frames) * 255).round()

    service, config = service_and_config
    request = config.request(PROMPT, negative_prompt=NEGATIVE, **SIZE, num_inference_steps=STEPS,
                             guidance_scale=GUIDANCE, image=_image() if with_image else None)  # fmt: skip
    latents = service.generate(request, initial_latents=_noise().numpy(), output_type="latent").array
    frames = service.generate(request, initial_latents=_noise().numpy()).array

    error = np.max(np.abs(latents - expected_latents)) / np.max(np.abs(expected_latents))
    assert error <= 1e-4, f"relative error {error:.2e}"
    assert np.max(np.abs(frames.astype(int) - expected_frames.astype(int))) <= 1
