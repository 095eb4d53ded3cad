"""`wanjax generate` on a tiny SkyReels-V2 DF checkpoint: --num-frames beyond one window with the DF
options as `--set` settings under diffusers' names, the whole video's noise from --latents (the
service's run of the same request gives the same latents), and --video extending a video (its frames,
then the new ones)."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from tiny_skyreels import tiny_skyreels_df_pipeline
from wanjax.application.container import build_container
from wanjax.application.presets import resolve_config
from wanjax.entrypoints.cli import main

SIZE = ["--height", "32", "--width", "48", "--steps", "2", "--set", "max_sequence_length=8"]
WINDOWS = ["--set", "base_num_frames=21", "--set", "overlap_history=9"]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny-skyreels-df")
    tiny_skyreels_df_pipeline().save_pretrained(folder)
    return folder


def test_a_long_video_with_diffusers_settings_and_given_noise(checkpoint, tmp_path):
    noise = np.random.default_rng(4).standard_normal((1, 16, 10, 4, 6)).astype(np.float32)  # 37 frames' latents
    np.save(tmp_path / "noise.npy", noise)
    out = tmp_path / "latents.npy"
    settings = ["--set", "ar_step=1", "--set", "causal_block_size=2"]
    assert main(["generate", "--model", str(checkpoint), "--prompt", "a boat", *SIZE, "--num-frames", "37", *WINDOWS,
                 *settings, "--latents", str(tmp_path / "noise.npy"), "--output-type", "latent", "--quiet",
                 "--out", str(out)]) == 0  # fmt: skip

    config = resolve_config(str(checkpoint), {"max_sequence_length": "8"})
    request = config.request(
        "a boat", height=32, width=48, num_frames=37, num_inference_steps=2, base_num_frames=21,
        overlap_history=9, ar_step=1, causal_block_size=2,
    )  # fmt: skip
    expected = build_container(config).service().generate(request, initial_latents=noise, output_type="latent").array
    np.testing.assert_array_equal(np.load(out), expected)


def test_a_video_is_extended(checkpoint, tmp_path):
    frames = np.random.default_rng(3).integers(0, 256, (13, 32, 48, 3), dtype=np.uint8)
    (tmp_path / "frames").mkdir()
    for i, frame in enumerate(frames):
        Image.fromarray(frame).save(tmp_path / "frames" / f"{i:02d}.png")
    out = tmp_path / "video.npy"
    assert main(["generate", "--model", str(checkpoint), "--prompt", "a boat", *SIZE, "--num-frames", "21", *WINDOWS,
                 "--video", str(tmp_path / "frames"), "--quiet", "--out", str(out)]) == 0  # fmt: skip
    video = np.load(out)
    assert video.shape[-4:] == (13 + 21, 32, 48, 3)  # the video given, then the 21 frames made after it
    np.testing.assert_array_equal(video.reshape(-1, 32, 48, 3)[:13], frames)


def test_the_settings_are_fields_over_http(checkpoint):
    from wanjax.application.job_requests import request_from_record, request_record, validated_request
    from wanjax.domain.modes.diffusion_forcing.options import DiffusionForcingOptions

    config = resolve_config(str(checkpoint), {"max_sequence_length": "8"})
    service = build_container(config).service()
    fields = {"prompt": "a boat", "size": "48x32", "num_frames": 37, "base_num_frames": 21, "overlap_history": 9,
              "ar_step": 1, "causal_block_size": 2, "addnoise_condition": 20, "fps": 16}  # fmt: skip
    request = validated_request(fields, {}, config, service, model="df")
    asked = DiffusionForcingOptions(base_num_frames=21, overlap_history=9, ar_step=1, causal_block_size=2,
                                    addnoise_condition=20)  # fmt: skip
    assert request.options == asked and request.fps == 16
    assert request_from_record(request_record(request), {}, config) == request  # a job's record keeps them


def test_thirty_seconds_at_720p_plan_on_a_24_gib_device(capsys):
    def planned(frames: str) -> dict[str, str]:
        assert main(["plan", "--model", "skyreels-v2-df-14b-720p", "--prompt", "a boat", "--num-frames", frames,
                     "--device-memory", "24GiB", "--host-memory", "64GiB", "--set", "offload=layers"]) == 0  # fmt: skip
        lines = capsys.readouterr().out.splitlines()
        return {line[:38].strip(): line[38:].strip() for line in lines if line.startswith("  ")}

    long, window = planned("721"), planned("121")  # 30 s at 24 fps; one window of base_num_frames=121
    assert long["denoising step activations"] == window["denoising step activations"]  # one window at a time
    assert float(long["estimated peak (denoising)"].split()[0]) <= 24.0


def test_a_video_to_extend_over_http_is_read_whole(checkpoint, tmp_path):
    from wanjax.adapters.media.video_files import Mp4Sink
    from wanjax.application.job_requests import queued_request, request_from_record, request_record, validated_request

    Mp4Sink().write(np.full((29, 32, 48, 3), 90, np.uint8), tmp_path / "source.mp4", fps=24)
    media = {"video": (tmp_path / "source.mp4").read_bytes()}
    config = resolve_config(str(checkpoint), {"max_sequence_length": "8"})
    service = build_container(config).service()
    fields = {"prompt": "a boat", "size": "48x32", "num_frames": 21, "base_num_frames": 21, "overlap_history": 9}
    request = validated_request(fields, media, config, service, model="df")
    assert request.input("video").shape[0] == 29  # every frame of it, not the first num_frames as video-to-video
    record = {**request_record(request), "media": ["video"]}
    assert queued_request(record, config).input("video").shape[0] == 29
    assert request_from_record(record, media, config).input("video").shape == (29, 32, 48, 3)
