"""SkyReels-V2 Diffusion Forcing against diffusers' SkyReelsV2DiffusionForcingPipeline on the same
tiny random checkpoint: a 37-frame video in three windows of base_num_frames=21 overlapping by
overlap_history=9 (10 latent frames: windows of 6, 6 and 4), synchronously (ar_step 0, one-frame
blocks) and asynchronously (ar_step 1 in causal blocks of 2, which cuts each window's 3 given latent
frames to 2).

diffusers draws each window's noise afresh; wanjax takes the whole video's (`initial_latents`, the
final latents' shape) and starts each window from its slice, so the test hands diffusers those
slices, window by window, as its draws. Tolerances as the T2V pipeline test's: final latents within
1e-4 of max|ref| in fp32, uint8 frames within 1 level.
"""

import numpy as np
import pytest
import torch

from tiny_skyreels import tiny_skyreels_df_pipeline
from wanjax.application.container import build_container
from wanjax.application.presets import resolve_config

PROMPT, NEGATIVE = "a small red boat on a calm lake", "blurry, low quality"
HEIGHT, WIDTH, FRAMES, STEPS, GUIDANCE, MAX_LEN = 32, 48, 37, 3, 5.0, 16
BASE, OVERLAP = 21, 9
WINDOWS = ((0, 6), (3, 6), (6, 4))  # (first latent frame, latent frames) of each window
CASES = {"synchronous": dict(ar_step=0), "asynchronous": dict(ar_step=1, causal_block_size=2)}


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny-skyreels-df")
    tiny_skyreels_df_pipeline().save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def noise():
    latent_frames = (FRAMES - 1) // 4 + 1
    return torch.randn(1, 16, latent_frames, HEIGHT // 8, WIDTH // 8, generator=torch.Generator().manual_seed(5))


def _reference(checkpoint, noise, monkeypatch, options, output_type):
    """diffusers' run, its k-th window drawn as the k-th slice of `noise`."""
    from diffusers import SkyReelsV2DiffusionForcingPipeline
    from diffusers.pipelines.skyreels_v2 import pipeline_skyreels_v2_diffusion_forcing as module

    slices = iter([noise[:, :, start : start + length].clone() for start, length in WINDOWS])

    def drawn(shape, **kwargs):
        window = next(slices)
        assert tuple(shape) == tuple(window.shape)
        return window

    monkeypatch.setattr(module, "randn_tensor", drawn)
    pipe = SkyReelsV2DiffusionForcingPipeline.from_pretrained(checkpoint)  # fresh: async runs set its block size
    pipe.set_progress_bar_config(disable=True)
    out = pipe(
        prompt=PROMPT, negative_prompt=NEGATIVE, height=HEIGHT, width=WIDTH, num_frames=FRAMES,
        num_inference_steps=STEPS, guidance_scale=GUIDANCE, max_sequence_length=MAX_LEN,
        base_num_frames=BASE, overlap_history=OVERLAP, output_type=output_type, **options,
    ).frames  # fmt: skip
    assert next(slices, None) is None, "diffusers ran another number of windows"
    return np.asarray(out)


@pytest.fixture(scope="module")
def service(checkpoint):
    config = resolve_config(
        str(checkpoint),
        {
            "dtype": "float32", "sigma_schedule": "diffusers", "max_sequence_length": str(MAX_LEN),
            "height": str(HEIGHT), "width": str(WIDTH), "num_frames": str(FRAMES),
            "num_inference_steps": str(STEPS), "guidance_scale": str(GUIDANCE), "negative_prompt": NEGATIVE,
            "fps": "24", "base_num_frames": str(BASE), "overlap_history": str(OVERLAP),
        },
    )  # fmt: skip
    return config, build_container(config).service()


@pytest.mark.parametrize("case", CASES)
def test_final_latents_and_frames_match_diffusers(case, checkpoint, noise, service, monkeypatch):
    config, service = service
    request = config.request(PROMPT, **CASES[case])
    expected = _reference(checkpoint, noise, monkeypatch, CASES[case], "latent")
    got = service.generate(request, initial_latents=noise.numpy(), output_type="latent").array
    assert got.shape == expected.shape
    error = np.max(np.abs(got - expected)) / np.max(np.abs(expected))
    assert error <= 1e-4, f"relative error {error:.2e}"

    frames = (_reference(checkpoint, noise, monkeypatch, CASES[case], "np") * 255).round().astype(np.uint8)
    got = service.generate(request, initial_latents=noise.numpy()).array
    assert got.shape == frames.shape == (1, FRAMES, HEIGHT, WIDTH, 3)
    assert np.max(np.abs(got.astype(int) - frames.astype(int))) <= 1
