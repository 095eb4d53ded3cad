"""Wan 2.2 S2V against the official code's own pipeline (`wan/speech2video.py`, `WanS2V.generate`),
both on one tiny official-format folder: the official modules (tests/official_folders.py, kind
"s2v": a 2-block WanModel_S2V with the release's switches, the Wan 2.1 VAE, T5) plus a tiny random
wav2vec2 (the release's 24 layers, 8 wide) saved as the folder's `wav2vec2-large-xlsr-53-english/`,
run the official loop; wanjax loads the folder (`--model FOLDER`).

The official default solver (unipc, shift 3), guidance 4.5 with a negative prompt, 8-frame clips
over speech of 0.7 s (a 16 kHz WAV written here: no whole number of clips; the official count
gives 2, the second running past the audio), a 40x100 reference image for a 64x128 video (its
short side resized and its centre cropped by both). The official code derives the size from the
image and `max_area`; wanjax takes it from the request: the test hands the official pipeline the
request's size (`get_gen_size`). Clip k's noise is a torch generator's seeded with seed + k on
both sides (`NoiseOfSeed`). The official `generate` runs under bfloat16 autocast on CUDA only:
here in float32.

Also: `--output-type latent` (the clips' latents joined), `--latents` (the first clip's noise),
and a pose video (at the video's size: the official code resizes its tensors with torchvision,
which is not installed here; at that size its resize and crop return them as they are).

Tolerances as the other official parities: each clip's final latents within 1e-4 of max|ref| in
fp32, uint8 frames within 1 level.
"""

from __future__ import annotations

import wave
from pathlib import Path

import av
import numpy as np
import pytest
import torch
from PIL import Image

from official_folders import TEXT_LEN, RecordingVae, official_text_encoder, write_s2v_folder
from official_wan import official_pipeline, official_s2v_audio_encoder, official_speech2video
from segment_noise import NoiseOfSeed

from wanjax.application.container import build_container
from wanjax.application.presets import resolve_config

pytestmark = pytest.mark.filterwarnings(
    "ignore:.*CUDA is not available:UserWarning",
    "ignore:In CPU autocast, but the target dtype is not supported:UserWarning",
    "ignore:.*torch.cuda.amp.autocast.*:FutureWarning",
    "ignore:User provided device_type of 'cuda', but CUDA is not available:UserWarning",
)
PROMPT, NEGATIVE = "a woman talks", "blurry"
HEIGHT, WIDTH, INFER_FRAMES, STEPS, SHIFT, GUIDANCE, SEED = 64, 128, 8, 2, 3.0, 4.5, 5
SAMPLE_RATE, SECONDS = 16_000, 0.7
REFERENCE = (40, 100)  # height, width: aspect 2.5 against the video's 2
CLIPS = 2  # int(T30 / (8 * 30 / 16)) + 1 for 0.7 s
LATENT_TOLERANCE = 1e-4  # of max |latent|


def _official_audio_encoder(model: object, extractor: object) -> object:
    encoder = object.__new__(official_s2v_audio_encoder().AudioEncoder)  # its __init__ loads by name
    encoder.processor, encoder.model, encoder.video_rate = extractor, model, 30
    return encoder


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    folder, models, wav2vec2, extractor = write_s2v_folder(tmp_path_factory.mktemp("s2v-official"))
    vae = RecordingVae(models)
    official_speech2video()  # imported with its stand-ins before `official_pipeline` imports it
    official = official_pipeline(
        "wan.speech2video.WanS2V", noise_model=models.experts[0], vae=vae, text_encoder=official_text_encoder(models, folder),
        audio_encoder=_official_audio_encoder(wav2vec2, extractor), num_train_timesteps=1000, param_dtype=torch.float32,
        sample_neg_prompt="", motion_frames=73, drop_first_motion=True, fps=16, audio_sample_m=0,
    )  # fmt: skip
    official.get_gen_size = lambda **_: (HEIGHT, WIDTH)  # wanjax's size is the request's
    inputs = tmp_path_factory.mktemp("s2v-inputs")
    rng = np.random.default_rng(4)
    image = rng.integers(0, 256, (*REFERENCE, 3), dtype=np.uint8)
    Image.fromarray(image).save(inputs / "reference.png")
    pcm = (rng.standard_normal(int(SECONDS * SAMPLE_RATE)) * 3000).astype(np.int16)
    with wave.open(str(inputs / "speech.wav"), "wb") as out:
        out.setnchannels(1), out.setsampwidth(2), out.setframerate(SAMPLE_RATE)
        out.writeframes(pcm.astype("<i2").tobytes())

    from dependency_injector import providers

    config = resolve_config(str(folder), {"max_sequence_length": str(TEXT_LEN), "text_embeddings_cache_dir": "none"})
    container = build_container(config)
    denoiser = NoiseOfSeed(container.denoiser(), SEED, (16, INFER_FRAMES // 4, HEIGHT // 8, WIDTH // 8), CLIPS)
    container.denoiser.override(providers.Object(denoiser))
    return official, vae, inputs, image, pcm, config, container.service(), denoiser


def _official(setup, pose_video: str | None = None) -> tuple[np.ndarray, list[np.ndarray]]:
    """The official video [F, H, W, 3] uint8 and each clip's final latents [C, F', H', W']."""
    official, vae, inputs, *_ = setup
    vae.decoded.clear()
    with torch.no_grad():
        video = official.generate(
            PROMPT, str(inputs / "reference.png"), str(inputs / "speech.wav"), False, None, None, None,
            num_repeat=None, pose_video=pose_video, max_area=HEIGHT * WIDTH, infer_frames=INFER_FRAMES, shift=SHIFT,
            sample_solver="unipc", sampling_steps=STEPS, guide_scale=GUIDANCE, n_prompt=NEGATIVE, seed=SEED,
            offload_model=False,
        )  # fmt: skip
    frames = np.round(((video.clamp(-1, 1) + 1) / 2 * 255).numpy()).astype(np.uint8).transpose(1, 2, 3, 0)
    return frames, [latents[:, -INFER_FRAMES // 4 :] for latents in vae.decoded]  # behind the reference / motion


@pytest.fixture(scope="module")
def official_run(setup) -> tuple[np.ndarray, list[np.ndarray]]:
    return _official(setup)


def _request(config, pcm: np.ndarray, image: np.ndarray, **pose: np.ndarray):
    return config.request(
        PROMPT, negative_prompt=NEGATIVE, height=HEIGHT, width=WIDTH, num_inference_steps=STEPS, flow_shift=SHIFT,
        sample_solver="unipc", guidance_scale=GUIDANCE, seed=SEED, image=image,
        audio=pcm.astype(np.float32) / 32768.0, infer_frames=INFER_FRAMES, **pose,
    )  # fmt: skip


def _relative_error(ours: np.ndarray, reference: np.ndarray) -> float:
    assert ours.shape == reference.shape
    return float(np.max(np.abs(ours - reference)) / np.max(np.abs(reference)))


def test_matches_the_official_pipeline_over_two_clips(setup, official_run):
    _, _, _, image, pcm, config, service, denoiser = setup
    expected_frames, expected_latents = official_run
    denoiser.denoised.clear()
    frames = service.generate(_request(config, pcm, image)).array[0]

    assert len(expected_latents) == len(denoiser.denoised) == CLIPS
    for ours, reference in zip(denoiser.denoised, expected_latents):
        error = _relative_error(ours[0].transpose(3, 0, 1, 2), reference)
        assert error <= LATENT_TOLERANCE, f"relative error {error:.2e}"
    assert frames.shape == expected_frames.shape == (2 * INFER_FRAMES - 3, HEIGHT, WIDTH, 3)
    assert np.ptp(expected_frames) > 0
    assert np.max(np.abs(frames.astype(int) - expected_frames.astype(int))) <= 1


def test_latent_output_joins_the_clips_and_latents_given_start_the_first(setup, official_run, monkeypatch):
    """`--output-type latent`: the clips' final latents joined along frames; `--latents`: the first
    clip's noise (the official draw, handed in as diffusers' [B, C, F', H', W'], while the seed's
    own noise is made zeros: only the given latents can start clip 0 as the official run did)."""
    _, _, _, image, pcm, config, service, denoiser = setup
    noise = torch.randn((16, INFER_FRAMES // 4, HEIGHT // 8, WIDTH // 8), generator=torch.Generator().manual_seed(SEED))
    monkeypatch.setitem(denoiser._noise, SEED, np.zeros_like(denoiser._noise[SEED]))
    result = service.generate(_request(config, pcm, image), initial_latents=noise.numpy()[None], output_type="latent")
    joined = np.asarray(result.array)[0]  # [C, clips * F', H', W']
    error = _relative_error(joined, np.concatenate(official_run[1], axis=1))
    assert error <= LATENT_TOLERANCE, f"relative error {error:.2e}"


def test_a_pose_video_drives_the_clips_as_the_official_code(setup, official_run, tmp_path):
    """11 pose frames at the video's size (16 fps, a lossless mp4 for the official reader): the
    clips read frames 0-7 and 8-10, padded with -1 frames."""
    _, _, _, image, pcm, config, service, denoiser = setup
    pose = np.random.default_rng(6).integers(0, 256, (11, HEIGHT, WIDTH, 3), dtype=np.uint8)
    with av.open(str(tmp_path / "pose.mp4"), "w") as container:
        stream = container.add_stream("libx264rgb", rate=16, options={"qp": "0"})
        stream.width, stream.height, stream.pix_fmt = WIDTH, HEIGHT, "rgb24"
        for frame in pose:
            container.mux(stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")))
        container.mux(stream.encode())
    _, expected = _official(setup, str(tmp_path / "pose.mp4"))
    denoiser.denoised.clear()
    service.generate(_request(config, pcm, image, pose_video=pose))
    assert len(denoiser.denoised) == len(expected) == CLIPS
    assert _relative_error(expected[0], official_run[1][0]) > 1e-2  # the pose changed the video
    for ours, reference in zip(denoiser.denoised, expected):
        error = _relative_error(ours[0].transpose(3, 0, 1, 2), reference)
        assert error <= LATENT_TOLERANCE, f"relative error {error:.2e}"
