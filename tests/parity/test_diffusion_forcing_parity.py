"""SkyReels-V2 Diffusion Forcing against diffusers' SkyReelsV2DiffusionForcingPipeline on the same
tiny random checkpoint: a 37-frame video (45 from an image) in three windows of base_num_frames=21 overlapping by
overlap_history=9 (10 latent frames: windows of 6, 6 and 4), synchronously (ar_step 0, one-frame
blocks) and asynchronously (ar_step 1 in causal blocks of 2, which cuts each window's 3 given latent
frames to 2); from text, from a first frame (the image-to-video pipeline) and extending a 13-frame
video (the video-to-video pipeline: its last 9 frames start the first window).

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
HEIGHT, WIDTH, STEPS, GUIDANCE, MAX_LEN = 32, 48, 3, 5.0, 16
BASE, OVERLAP = 21, 9
FRAMES = {37: ((0, 6), (3, 6), (6, 4)), 45: ((0, 6), (3, 6), (6, 6))}
"""Frames -> (first latent frame, latent frames) of each window. diffusers' image-to-video DF pipeline
fails on a last window shorter than the others (it steps base_num_frames' worth of frame schedulers,
IndexError), so its case makes three whole windows."""
CASES = {  # (pipeline, frames, options, inputs)
    "synchronous": ("", 37, dict(ar_step=0), ()),
    "asynchronous": ("", 37, dict(ar_step=1, causal_block_size=2), ()),
    "image, synchronous": ("_i2v", 45, dict(ar_step=0), ("image",)),
    "extension, asynchronous": ("_v2v", 37, dict(ar_step=1, causal_block_size=2), ("video",)),
}
SOURCE_FRAMES = 13  # the extended video's


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny-skyreels-df")
    tiny_skyreels_df_pipeline().save_pretrained(folder)
    return folder


def _noise(frames):
    latent_frames = (frames - 1) // 4 + 1
    return torch.randn(1, 16, latent_frames, HEIGHT // 8, WIDTH // 8, generator=torch.Generator().manual_seed(5))


@pytest.fixture(scope="module")
def inputs():
    rng = np.random.default_rng(7)
    return {
        "image": rng.integers(0, 256, (HEIGHT, WIDTH, 3), dtype=np.uint8),
        "video": rng.integers(0, 256, (SOURCE_FRAMES, HEIGHT, WIDTH, 3), dtype=np.uint8),
    }


def _reference(checkpoint, noise, monkeypatch, case, given, output_type):
    """diffusers' run, its k-th window drawn as the k-th slice of `noise`."""
    import importlib

    import diffusers
    from PIL import Image

    suffix, frames, options, names = CASES[case]
    module = importlib.import_module(f"diffusers.pipelines.skyreels_v2.pipeline_skyreels_v2_diffusion_forcing{suffix}")
    slices = iter([noise[:, :, start : start + length].clone() for start, length in FRAMES[frames]])

    def drawn(shape, **kwargs):
        window = next(slices)
        assert tuple(shape) == tuple(window.shape)
        return window

    monkeypatch.setattr(module, "randn_tensor", drawn)
    pipe = diffusers.SkyReelsV2DiffusionForcingPipeline.from_pretrained(checkpoint)  # fresh: async runs set its block size
    cls = {"": type(pipe), "_i2v": diffusers.SkyReelsV2DiffusionForcingImageToVideoPipeline,
           "_v2v": diffusers.SkyReelsV2DiffusionForcingVideoToVideoPipeline}[suffix]  # fmt: skip
    pipe = cls(**pipe.components)
    pipe.set_progress_bar_config(disable=True)
    extra = {}
    if "image" in names:
        extra["image"] = Image.fromarray(given["image"])
    if "video" in names:
        extra["video"] = [Image.fromarray(frame) for frame in given["video"]]
    out = pipe(
        prompt=PROMPT, negative_prompt=NEGATIVE, height=HEIGHT, width=WIDTH, num_frames=frames,
        num_inference_steps=STEPS, guidance_scale=GUIDANCE, max_sequence_length=MAX_LEN,
        base_num_frames=BASE, overlap_history=OVERLAP, output_type=output_type, **options, **extra,
    ).frames  # fmt: skip
    assert next(slices, None) is None, "diffusers ran another number of windows"
    return np.asarray(out)


@pytest.fixture(scope="module")
def service(checkpoint):
    config = resolve_config(
        str(checkpoint),
        {
            "dtype": "float32", "sigma_schedule": "diffusers", "max_sequence_length": str(MAX_LEN),
            "height": str(HEIGHT), "width": str(WIDTH),
            "num_inference_steps": str(STEPS), "guidance_scale": str(GUIDANCE), "negative_prompt": NEGATIVE,
            "fps": "24", "base_num_frames": str(BASE), "overlap_history": str(OVERLAP),
        },
    )  # fmt: skip
    return config, build_container(config).service()


@pytest.mark.parametrize("case", CASES)
def test_final_latents_and_frames_match_diffusers(case, checkpoint, inputs, service, monkeypatch):
    config, service = service
    _, frames, options, names = CASES[case]
    noise = _noise(frames)
    request = config.request(PROMPT, num_frames=frames, **options, **{name: inputs[name] for name in names})
    expected = _reference(checkpoint, noise, monkeypatch, case, inputs, "latent")
    got = service.generate(request, initial_latents=noise.numpy(), output_type="latent").array
    assert got.shape == expected.shape
    error = np.max(np.abs(got - expected)) / np.max(np.abs(expected))
    assert error <= 1e-4, f"relative error {error:.2e}"

    video = (_reference(checkpoint, noise, monkeypatch, case, inputs, "np") * 255).round().astype(np.uint8)
    got = service.generate(request, initial_latents=noise.numpy()).array
    made = frames + (SOURCE_FRAMES if "video" in names else 0)  # an extension: the video, then what was made
    assert got.shape == video.shape == (1, made, HEIGHT, WIDTH, 3)
    assert np.max(np.abs(got.astype(int) - video.astype(int))) <= 1
