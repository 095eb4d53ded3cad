"""`wanjax plan` reads its input videos' lengths and sizes from their headers: a long Animate pose
video of small frames is planned with none of its frames decoded. mp4 records its frame count in
its header (the sample table); matroska does not, so its packets are counted, demuxed only; a frame
folder is counted by its files, their sizes read from their headers. The decoder is a spy that
fails the test if anything is decoded, and the plan is asked which request it planned."""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np
import pytest
from PIL import Image

from wanjax.adapters.media.readers import probe_input
from wanjax.application.memory import MemoryPlanner
from wanjax.domain.errors import InvalidRequestError
from wanjax.domain.inputs import kinds
from wanjax.domain.inputs.reader import VideoSize
from wanjax.entrypoints.cli import main

FRAMES, SIDE = 2001, 16  # thousands of small frames, as a long pose video at low resolution
ANIMATE = ["--model", "wan2.2-animate-14b", "--prompt", "a dancer", "--device-memory", "80GiB"]


def _write(path: Path, frames: int, form: str) -> Path:
    """`frames` small grey frames (each its own level), encoded fast."""
    with av.open(str(path), "w", format=form) as container:
        stream = container.add_stream("libx264", rate=16, options={"preset": "ultrafast"})
        stream.width = stream.height = SIDE
        stream.pix_fmt = "yuv420p"
        for i in range(frames):
            pixels = np.full((SIDE, SIDE, 3), i % 256, np.uint8)
            container.mux(stream.encode(av.VideoFrame.from_ndarray(pixels, format="rgb24")))
        container.mux(stream.encode())
    return path


@pytest.fixture(scope="module")
def videos(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("long-videos")
    return {"mp4": _write(folder / "pose.mp4", FRAMES, "mp4"), "mkv": _write(folder / "pose.mkv", FRAMES, "matroska"),
            "face": _write(folder / "face.mp4", 9, "mp4")}  # fmt: skip


class _Opened:
    """A PyAV container whose decoding fails the test; it records whether packets were demuxed."""

    def __init__(self, container, demuxed: list[str]) -> None:
        self._container, self._demuxed = container, demuxed

    def __enter__(self) -> _Opened:
        return self

    def __exit__(self, *exc) -> None:
        self._container.close()

    def decode(self, *args, **kwargs):
        pytest.fail("a frame was decoded")

    def demux(self, *args, **kwargs):
        self._demuxed.append(self._container.name)
        return self._container.demux(*args, **kwargs)

    def __getattr__(self, name: str):
        return getattr(self._container, name)


@pytest.fixture
def demuxed(monkeypatch) -> list[str]:
    """The files whose packets were counted; PyAV's decoding and wanjax's image decoding fail the test."""
    opened, names = av.open, []
    monkeypatch.setattr(av, "open", lambda *args, **kwargs: _Opened(opened(*args, **kwargs), names))
    monkeypatch.setattr(Image.Image, "convert", lambda *args, **kwargs: pytest.fail("an image was decoded"))
    return names


@pytest.fixture
def planned(monkeypatch) -> list:
    """The requests the memory plan checked."""
    check, requests = MemoryPlanner.check, []

    def recording(self, request, **kwargs):
        requests.append(request)
        return check(self, request, **kwargs)

    monkeypatch.setattr(MemoryPlanner, "check", recording)
    return requests


def test_a_long_pose_video_is_planned_from_its_header(videos, tmp_path, demuxed, planned, capsys):
    Image.fromarray(np.zeros((40, 30, 3), np.uint8)).save(tmp_path / "character.png")
    media = ["--image", str(tmp_path / "character.png"), "--pose-video", str(videos["mp4"]),
             "--face-video", str(videos["face"])]  # fmt: skip
    assert main(["plan", *ANIMATE, *media]) == 0
    assert "estimated peak" in capsys.readouterr().out
    (request,) = planned
    assert request.input("pose_video").shape == (FRAMES, 720, 1280, 3)  # the preset's size, the file's length
    assert request.input("face_video").shape == (9, SIDE, SIDE, 3)
    assert request.input("image").shape == (40, 30, 3)  # the character as given: the run letterboxes it
    assert request.input("pose_video").strides[0] == 0  # a stand-in: no pixels held
    assert demuxed == []  # mp4's count is in its header


def test_files_and_a_clients_bytes_without_a_header_count_are_counted_by_their_packets(videos, demuxed) -> None:
    data = videos["mkv"].read_bytes()
    assert probe_input(kinds.WHOLE_SIZED_VIDEO, videos["mkv"], "--video", VideoSize(5, 1, 1)) == (FRAMES, SIDE, SIDE)
    assert probe_input(kinds.WHOLE_SIZED_VIDEO, data, "pose_video (the request's file)", VideoSize(5, 1, 1)) == (FRAMES, SIDE, SIDE)
    assert len(demuxed) == 2
    assert probe_input(kinds.WHOLE_VIDEO, videos["mp4"].read_bytes(), "face_video", VideoSize(5, 1, 1)) == (FRAMES, SIDE, SIDE)
    assert len(demuxed) == 2  # an mp4's bytes: its header's count


def test_the_header_count_is_the_decoded_count_and_bounded(videos) -> None:
    for form in ("mp4", "mkv"):
        with av.open(str(videos[form])) as container:
            decoded = sum(1 for _ in container.decode(video=0))
        assert decoded == FRAMES
        assert probe_input(kinds.WHOLE_VIDEO, videos[form], "--video", VideoSize(5, 1, 1)) == (FRAMES, SIDE, SIDE)
        assert probe_input(kinds.VIDEO, videos[form], "--video", VideoSize(5, 1, 1)) == (5, SIDE, SIDE)  # the first num_frames
    with pytest.raises(InvalidRequestError, match=r"face.mp4 has 9 frame\(s\); num_frames=13 needs"):
        probe_input(kinds.VIDEO, videos["face"], "--video", VideoSize(13, 1, 1))


def test_a_frame_folder_is_counted_by_its_files_headers(tmp_path, demuxed) -> None:
    for i in range(7):
        Image.fromarray(np.zeros((12, 20, 3), np.uint8)).save(tmp_path / f"{i:03}.png")
    assert probe_input(kinds.WHOLE_SIZED_VIDEO, tmp_path, "--video", VideoSize(5, 1, 1)) == (7, 12, 20)
    Image.fromarray(np.zeros((12, 22, 3), np.uint8)).save(tmp_path / "007.png")
    with pytest.raises(InvalidRequestError, match=r"frames differ in size \(\(12, 20, 3\), \(12, 22, 3\)\)"):
        probe_input(kinds.WHOLE_VIDEO, tmp_path, "--video", VideoSize(5, 1, 1))
