"""Wan 2.2 Animate against the official code's own pipeline (`wan/animate.py`, `WanAnimate.generate`),
both on one tiny official-format folder: the official modules (tests/official_folders.py, kind
"animate": a 5-block WanAnimateModel, the Wan 2.1 VAE, T5 and open-clip CLIP) run the official
loop, and wanjax loads the folder those modules were saved to (`--model FOLDER`).

The official default grid (dpm++ on the Wan sigma grid, shift 5), animation without guidance
(the official default) and replacement with guidance (the unconditional pass sees a blank
face), each over two segments: 7 driving frames padded back and forth to 9, segments of 5
with 1 frame of conditioning. The official code reads its preprocessed folder (src_pose.mp4,
src_face.mp4, src_ref.png, src_bg.mp4, src_mask.mp4), written here from the test's arrays as
lossless RGB mp4s. The character is 37x23 for a 48x32 video: the official code letterboxes it
(OpenCV itself) and CLIP sees that canvas squashed to its 32x32, as wanjax does by default. Where
the two differ (docs/sampling.md lists it all), the inputs make the
difference vanish: a grey mask (its first channel is its grey), the later
segment's noise the official generator's second draw (`NoiseInTurn`). The official `generate`
casts to bfloat16 and runs under bfloat16 autocast; here its module sees a `torch` whose
bfloat16 is float32.

Tolerances as the other official parities: each segment's final latents within 1e-4 of
max|ref| in fp32, uint8 frames within 1 level.
"""

from __future__ import annotations

import sys
import types
from pathlib import Path

import av
import numpy as np
import pytest
import torch
from PIL import Image

from animate_videos import random_animate_videos
from official_folders import (
    ANIMATE_FACE,
    TEXT_LEN,
    RecordingVae,
    official_models,
    official_text_encoder,
    write_official_folder,
)
from official_wan import OpenClipTransforms, official_animate, official_pipeline
from segment_noise import NoiseInTurn

from wanjax.application.container import build_container
from wanjax.application.presets import resolve_config

pytestmark = pytest.mark.filterwarnings(
    "ignore:.*CUDA is not available:UserWarning",  # the Wan code's autocast
    "ignore:In CPU autocast, but the target dtype is not supported:UserWarning",  # generate's, at float32 here
    "ignore:None of the inputs have requires_grad:UserWarning",  # the motion encoder's checkpointing
    "ignore:.*torch.cuda.amp.autocast.*:FutureWarning",
)
PROMPT, NEGATIVE = "a dancer spins", "blurry"
HEIGHT, WIDTH, FRAMES, SEGMENT, STEPS, SHIFT, SEED = 32, 48, 7, 5, 2, 5.0, 11
CHARACTER = (37, 23)  # height, width: letterboxed 19 pixels wide, at 14 pixels from the left
LATENT_FRAMES = 1 + (SEGMENT - 1) // 4 + 1  # the reference frame, then the segment's
GUIDANCE = {"animate": 1.0, "replace": 2.0}
LATENT_TOLERANCE = 1e-4  # of max |latent|


class _Float32Torch(types.ModuleType):
    """`torch` as wan/animate.py sees it here: its bfloat16 is float32 (every cast, the autocast)."""

    bfloat16 = torch.float32

    def __getattr__(self, name: str) -> object:
        return getattr(torch, name)


def _official_clip(models) -> object:
    from wan.modules.animate.clip import CLIPModel

    clip = object.__new__(CLIPModel)
    clip.model, clip.transforms = models.clip, OpenClipTransforms()
    clip.dtype, clip.device = torch.float32, torch.device("cpu")
    return clip


@pytest.fixture(scope="module")
def inputs():
    videos = random_animate_videos(FRAMES, HEIGHT, WIDTH, face=(ANIMATE_FACE, ANIMATE_FACE))
    return dict(videos, image=np.random.default_rng(7).integers(0, 256, (*CHARACTER, 3), dtype=np.uint8))


def _write_video(frames: np.ndarray, path: Path) -> None:
    """Frames [F, H, W, 3] uint8 as a lossless mp4 (H.264 in RGB, qp 0): decoded, the same frames."""
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264rgb", rate=16, options={"qp": "0"})
        stream.width, stream.height, stream.pix_fmt = frames.shape[2], frames.shape[1], "rgb24"
        for frame in frames:
            container.mux(stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")))
        container.mux(stream.encode())


def _preprocessed_folder(folder: Path, inputs) -> Path:
    """What the official preprocessing writes and `generate` reads, from the test's arrays."""
    folder.mkdir()
    Image.fromarray(inputs["image"]).save(folder / "src_ref.png")
    grey = np.repeat(inputs["mask"][..., None], 3, axis=-1)
    for name, frames in (("pose", inputs["pose"]), ("face", inputs["face"]), ("bg", inputs["background"]), ("mask", grey)):
        _write_video(frames, folder / f"src_{name}.mp4")
    return folder


@pytest.fixture(scope="module")
def setup(tmp_path_factory, inputs):
    models = official_models("animate")
    folder = write_official_folder(tmp_path_factory.mktemp("animate-official"), models)
    vae = RecordingVae(models)
    official = official_pipeline(
        "wan.animate.WanAnimate", noise_model=models.experts[0], clip=_official_clip(models), vae=vae,
        text_encoder=official_text_encoder(models, folder), num_train_timesteps=1000, sample_neg_prompt="",
        sample_prompt="",
    )  # fmt: skip
    preprocessed = _preprocessed_folder(tmp_path_factory.mktemp("preprocessed") / "src", inputs)
    reader = sys.modules["wan.animate"].VideoReader(str(preprocessed / "src_face.mp4"))
    assert np.array_equal(reader.get_batch(range(len(reader))).asnumpy(), inputs["face"])  # lossless

    from dependency_injector import providers

    config = resolve_config(str(folder), {"max_sequence_length": str(TEXT_LEN), "text_embeddings_cache_dir": "none"})
    container = build_container(config)
    latent_shape = (models.vae.z_dim, LATENT_FRAMES, HEIGHT // 8, WIDTH // 8)
    denoiser = NoiseInTurn(container.denoiser(), SEED, latent_shape, segments=2)  # the official generator's draws
    container.denoiser.override(providers.Object(denoiser))
    return official, vae, preprocessed, config, container.service(), denoiser


def _official(official, vae: RecordingVae, preprocessed: Path, mode: str, monkeypatch) -> tuple[np.ndarray, list]:
    monkeypatch.setattr(official_animate(), "torch", _Float32Torch("torch"))
    vae.decoded.clear()
    video = official.generate(
        str(preprocessed), replace_flag=mode == "replace", clip_len=SEGMENT, refert_num=1, shift=SHIFT,
        sample_solver="dpm++", sampling_steps=STEPS, guide_scale=GUIDANCE[mode], input_prompt=PROMPT,
        n_prompt=NEGATIVE, seed=SEED, offload_model=False,
    )  # fmt: skip
    frames = np.round(((video.clamp(-1, 1) + 1) / 2 * 255).numpy()).astype(np.uint8).transpose(1, 2, 3, 0)
    return frames, list(vae.decoded)  # [F, H, W, 3]; each segment's final latents [C, F', H', W']


@pytest.mark.parametrize("mode", ["animate", "replace"])
def test_matches_the_official_pipeline_over_two_segments(setup, inputs, mode, monkeypatch):
    official, vae, preprocessed, config, service, denoiser = setup
    expected_frames, expected_latents = _official(official, vae, preprocessed, mode, monkeypatch)

    replace = dict(background_video=inputs["background"], mask=inputs["mask"]) if mode == "replace" else {}
    request = config.request(
        PROMPT, negative_prompt=NEGATIVE, height=HEIGHT, width=WIDTH, num_inference_steps=STEPS, flow_shift=SHIFT,
        sample_solver="dpm++", guidance_scale=GUIDANCE[mode], seed=SEED, image=inputs["image"],
        pose_video=inputs["pose"], face_video=inputs["face"], **replace, segment_frame_length=SEGMENT,
        prev_segment_conditioning_frames=1,
    )  # fmt: skip
    denoiser.denoised.clear()
    frames = service.generate(request).array[0]

    assert len(expected_latents) == len(denoiser.denoised) == 2
    for ours, reference in zip(denoiser.denoised, expected_latents):
        ours = ours[0, 1:].transpose(3, 0, 1, 2)  # the segment's frames, without the reference frame
        assert ours.shape == reference.shape
        error = np.max(np.abs(ours - reference)) / np.max(np.abs(reference))
        assert error <= LATENT_TOLERANCE, f"relative error {error:.2e}"
    assert frames.shape == expected_frames.shape == (FRAMES, HEIGHT, WIDTH, 3) and np.ptp(expected_frames) > 0
    assert np.max(np.abs(frames.astype(int) - expected_frames.astype(int))) <= 1
