"""Wan 2.2 Animate against diffusers' WanAnimatePipeline on a tiny random checkpoint saved with
`save_pretrained`: animation and replacement, each over two segments (13 driving frames, segments
of 9 with 1 frame of conditioning: the second segment starts from the first one's last frame, and
the videos are padded back and forth to 17 frames), with classifier-free guidance on (the
unconditional pass sees a blank face). The same noise on both sides: diffusers draws each
segment's from one generator; wanjax takes segment k's from seed + k, here a table of those draws.
Animation gets its face video at 20x12, which both stretch to the model's 16x16 faces; replacement
at 16x16, which both take as it is. The character is 23x37, which both letterbox onto the 48x32
video (19 pixels wide) and whose own view CLIP reads (wanjax as diffusers with
`sigma_schedule=diffusers`; tests/unit/test_character_canvas.py compares the preprocessing exactly).

Tolerances as the other pipeline parities: the last segment's final latents within 1e-4 of
max|ref| in fp32, uint8 frames within 1 level. 512 text tokens (diffusers' hard-coded split).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from animate_videos import random_animate_videos
from segment_noise import NoiseInTurn

from wanjax.application.container import build_container
from wanjax.application.presets import resolve_config
from wanjax.domain.errors import InvalidRequestError

PROMPT, NEGATIVE = "a dancer spins", "blurry"
HEIGHT, WIDTH, FRAMES, SEGMENT, FACE = 32, 48, 13, 9, 16
WIDE_FACE = (12, 20)  # height, width: not the model's FACE x FACE
CHARACTER = (37, 23)  # height, width: taller than the video, an odd scaled width
STEPS, GUIDANCE, SEED = 3, 2.0, 11
SEGMENT_LATENTS = (1, 16, 1 + (SEGMENT - 1) // 4 + 1, HEIGHT // 8, WIDTH // 8)


@pytest.fixture(scope="module")
def folder(tiny_animate_checkpoint):
    return tiny_animate_checkpoint


@pytest.fixture(scope="module")
def videos():
    videos = random_animate_videos(FRAMES, HEIGHT, WIDTH, face=(FACE, FACE))
    wide = random_animate_videos(FRAMES, HEIGHT, WIDTH, face=WIDE_FACE)["face"]
    character = np.random.default_rng(7).integers(0, 256, (*CHARACTER, 3), dtype=np.uint8)
    return dict(videos, wide_face=wide, image=character)


@pytest.fixture(scope="module")
def service(folder):
    from dependency_injector import providers

    settings = {"dtype": "float32", "sigma_schedule": "diffusers", "max_sequence_length": "512"}
    config = resolve_config(str(folder), settings)
    container = build_container(config)
    noise = NoiseInTurn(container.denoiser(), SEED, SEGMENT_LATENTS[1:], segments=2)  # diffusers' draws
    container.denoiser.override(providers.Object(noise))
    return config, container.service()


def _diffusers(folder, videos, mode, face):
    from diffusers import WanAnimatePipeline

    pipe = WanAnimatePipeline.from_pretrained(folder)
    pipe.set_progress_bar_config(disable=True)
    frames = lambda key, kind="RGB": [Image.fromarray(f, kind) for f in videos[key]]  # noqa: E731
    replace = dict(background_video=frames("background"), mask_video=frames("mask", "L")) if mode == "replace" else {}
    common = dict(
        image=Image.fromarray(videos["image"]), pose_video=frames("pose"), face_video=frames(face), **replace,
        prompt=PROMPT, negative_prompt=NEGATIVE, height=HEIGHT, width=WIDTH, segment_frame_length=SEGMENT,
        prev_segment_conditioning_frames=1, num_inference_steps=STEPS, mode=mode, guidance_scale=GUIDANCE,
        max_sequence_length=512,
    )  # fmt: skip
    seen = {}

    def keep_latents(pipe, step, timestep, tensors):  # the last call: the last segment's final latents
        seen["latents"] = tensors["latents"].numpy().copy()
        return tensors

    frames_out = pipe(
        **common, generator=torch.Generator().manual_seed(SEED), output_type="np", callback_on_step_end=keep_latents
    ).frames
    return seen["latents"], (np.asarray(frames_out) * 255).round()


def _request(config, videos, mode, face="face", **changes):
    inputs = {"pose_video": videos["pose"], "face_video": videos[face]}
    if mode == "replace":
        inputs.update(background_video=videos["background"], mask=videos["mask"])
    return config.request(
        PROMPT, negative_prompt=NEGATIVE, height=HEIGHT, width=WIDTH, num_inference_steps=STEPS,
        guidance_scale=GUIDANCE, image=videos["image"], **inputs, segment_frame_length=SEGMENT, seed=SEED,
        **changes,
    )  # fmt: skip


@pytest.mark.parametrize(("mode", "face"), [("animate", "wide_face"), ("replace", "face")], ids=["animate", "replace"])
def test_matches_diffusers_over_two_segments(folder, videos, service, mode, face):
    config, service = service
    expected_latents, expected_frames = _diffusers(folder, videos, mode, face)
    request = _request(config, videos, mode, face)
    latents = service.generate(request, output_type="latent").array
    frames = service.generate(request).array

    last = latents[:, :, SEGMENT_LATENTS[2]:]
    error = np.max(np.abs(last - expected_latents)) / np.max(np.abs(expected_latents))
    assert error <= 1e-4, f"relative error {error:.2e}"
    assert frames.shape == (1, FRAMES, HEIGHT, WIDTH, 3)
    assert np.max(np.abs(frames.astype(int) - expected_frames.astype(int))) <= 1


def test_animate_inputs_are_checked_before_loading(service, videos, tiny_i2v_checkpoint):
    config, service = service
    for inputs in ({}, {"image": videos["image"]}):  # text-to-video, image-to-video
        with pytest.raises(InvalidRequestError, match="Wan 2.2 Animate model: give the character"):
            service.check([config.request(PROMPT, height=HEIGHT, width=WIDTH, **inputs)])
    with pytest.raises(InvalidRequestError, match="prev_segment_conditioning_frames=3"):
        _request(config, videos, "animate", prev_segment_conditioning_frames=3)
    with pytest.raises(InvalidRequestError, match="needs both --background-video and --mask"):
        config.request(PROMPT, height=HEIGHT, width=WIDTH, image=videos["image"], pose_video=videos["pose"],
                       face_video=videos["face"], background_video=videos["background"])
    i2v = resolve_config(str(tiny_i2v_checkpoint), {"dtype": "float32"})
    with pytest.raises(InvalidRequestError, match="has no Animate blocks"):
        build_container(i2v).service().check([_request(i2v, videos, "animate")])
