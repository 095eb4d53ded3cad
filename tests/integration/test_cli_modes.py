"""`wanjax generate --video` on the demo model from a folder of frames, and mp4 sources read."""

import numpy as np
import pytest
from PIL import Image

from wanjax.adapters.media.video_files import Mp4Sink
from wanjax.adapters.media.video_input import read_video
from wanjax.application.container import build_container
from wanjax.application.presets import resolve_config
from wanjax.entrypoints.cli import main

SIZE = dict(height=32, width=48, num_frames=5)
SMALL = ["--height", "32", "--width", "48", "--num-frames", "5", "--steps", "4"]


@pytest.fixture(autouse=True)
def demo_in_session_cache(demo_cache, monkeypatch):
    monkeypatch.setenv("WANJAX_CACHE", str(demo_cache.parent))


def test_a_frames_folder_runs_as_the_same_video_through_the_service(tmp_path):
    frames = np.random.default_rng(3).integers(0, 256, (7, 24, 40, 3), dtype=np.uint8)  # two frames to spare
    (tmp_path / "frames").mkdir()
    for i, frame in enumerate(frames):
        Image.fromarray(frame).save(tmp_path / "frames" / f"{i:02d}.png")
    noise = np.random.default_rng(4).standard_normal((1, 16, 2, 4, 6)).astype(np.float32)
    np.save(tmp_path / "noise.npy", noise)
    out = tmp_path / "latents.npy"
    args = ["--video", str(tmp_path / "frames"), "--strength", "0.5", "--latents", str(tmp_path / "noise.npy")]
    assert main(["generate", "--prompt", "a fox", *SMALL, *args, "--output-type", "latent", "--quiet",
                 "--out", str(out)]) == 0  # fmt: skip

    config = resolve_config(None)
    service = build_container(config).service()
    expected = service.generate(
        config.request("a fox", **SIZE, num_inference_steps=4, video=frames[:5], strength=0.5),
        initial_latents=noise, output_type="latent",
    ).array
    np.testing.assert_array_equal(np.load(out), expected)


def test_an_mp4_is_read_frame_by_frame_up_to_num_frames(tmp_path):
    frames = np.full((9, 32, 48, 3), 200, np.uint8)
    frames[:, :, :24] = 40
    Mp4Sink().write(frames, tmp_path / "source.mp4", fps=16)
    video = read_video(tmp_path / "source.mp4", 5)
    assert video.shape == (5, 32, 48, 3) and video.dtype == np.uint8
    assert np.abs(video.astype(int) - frames[:5]).mean() < 3  # H.264 at crf 18, yuv420p
