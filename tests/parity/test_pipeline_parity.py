"""The whole T2V pipeline against diffusers' WanPipeline on the same tiny random checkpoint.

Both sides start from the same initial latents (given in diffusers' layout), encode the
same prompt and negative prompt, run CFG with UniPC-2 in flow mode, and decode. Tolerances:
final latents within 1e-4 of max|ref| in fp32 (a few transformer passes and solver steps,
each ~1e-6 apart, accumulate), uint8 frames within 1 level (rounding of values that
land near a .5 boundary may differ).
"""

import numpy as np
import pytest
import torch

from wanjax.application.container import build_container
from wanjax.application.presets import resolve_config
from wanjax.domain.config import GenerationConfig

PROMPT = "a small red boat on a calm lake"
NEGATIVE = "blurry, low quality"
HEIGHT, WIDTH, FRAMES, STEPS, GUIDANCE, MAX_LEN = 32, 48, 9, 4, 5.0, 16


@pytest.fixture(scope="module")
def reference(tiny_checkpoint):
    from diffusers import WanPipeline

    pipe = WanPipeline.from_pretrained(tiny_checkpoint)
    pipe.set_progress_bar_config(disable=True)
    latents = torch.randn(1, 16, (FRAMES - 1) // 4 + 1, HEIGHT // 8, WIDTH // 8, generator=torch.Generator().manual_seed(3))
    common = dict(
        prompt=PROMPT, negative_prompt=NEGATIVE, height=HEIGHT, width=WIDTH, num_frames=FRAMES,
        num_inference_steps=STEPS, guidance_scale=GUIDANCE, max_sequence_length=MAX_LEN,
    )  # fmt: skip
    final_latents = pipe(**common, latents=latents.clone(), output_type="latent").frames
    frames = pipe(**common, latents=latents.clone(), output_type="np").frames  # [B, F, H, W, 3] in [0, 1]
    return latents.numpy(), np.asarray(final_latents), (np.asarray(frames) * 255).round().astype(np.uint8)


@pytest.fixture(scope="module")
def config(tiny_checkpoint):
    return resolve_config(
        str(tiny_checkpoint),
        {
            "dtype": "float32", "sigma_schedule": "diffusers", "max_sequence_length": str(MAX_LEN),
            "height": str(HEIGHT),
            "width": str(WIDTH), "num_frames": str(FRAMES), "num_inference_steps": str(STEPS),
            "guidance_scale": str(GUIDANCE), "negative_prompt": NEGATIVE,
        },
    )  # fmt: skip


@pytest.fixture(scope="module")
def service(config):
    return build_container(config).service()


def test_final_latents_match_diffusers(reference, config, service):
    initial, expected, _ = reference
    got = service.generate(config.request(PROMPT), initial_latents=initial, output_type="latent").array
    assert got.shape == expected.shape
    error = np.max(np.abs(got - expected)) / np.max(np.abs(expected))
    assert error <= 1e-4, f"relative error {error:.2e}"


def test_frames_match_diffusers_within_one_level(reference, config, service):
    initial, _, expected = reference
    got = service.generate(config.request(PROMPT), initial_latents=initial).array
    assert got.dtype == np.uint8 and got.shape == expected.shape
    assert np.max(np.abs(got.astype(int) - expected.astype(int))) <= 1


def test_flow_shift_comes_from_the_folder_as_in_diffusers(config, tiny_checkpoint):
    from tiny_wan import FLOW_SHIFT

    assert config.sampling.flow_shift == FLOW_SHIFT != GenerationConfig().sampling.flow_shift  # 5.0 saved, 3.0 generic
    assert config.origin("flow_shift").startswith(f"checkpoint {tiny_checkpoint}")
