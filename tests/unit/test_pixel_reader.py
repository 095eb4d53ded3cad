"""Reading a mode's image and video inputs from files by kind (VACE's), through the registered
pixel reader: video and mask frames at the requested count and size, reference images fitted onto
a white canvas, and unreadable or short files named."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from wanjax.adapters.media.pixel_reader import reference_canvas
from wanjax.adapters.media.readers import read_input
from wanjax.adapters.media.video_files import Mp4Sink
from wanjax.domain.errors import InvalidRequestError
from wanjax.domain.inputs import kinds
from wanjax.domain.inputs.reader import VideoSize
from wanjax.domain.modes.vace import VACE

SIZE = VideoSize(num_frames=5, height=32, width=48)


def test_video_mask_and_references_are_read_at_the_request_size(tmp_path) -> None:
    grey = np.full((6, 32, 48, 3), 200, np.uint8)
    Mp4Sink().write(grey, tmp_path / "video.mp4", fps=16)
    white = np.full((6, 16, 24, 3), 255, np.uint8)  # half size: stretched to the video's
    Mp4Sink().write(white, tmp_path / "mask.mp4", fps=16)
    Image.fromarray(np.zeros((10, 30, 3), np.uint8)).save(tmp_path / "ref.png")

    given = {"--video": tmp_path / "video.mp4", "--mask": tmp_path / "mask.mp4", "--reference-image": [tmp_path / "ref.png"]}
    read = {field.name: read_input(field.kind, given[field.flag], field.flag, SIZE) for field in VACE.inputs}
    assert read["control_video"].shape == (5, 32, 48, 3) and abs(int(read["control_video"].mean()) - 200) <= 2
    assert read["mask"].shape == (5, 32, 48) and read["mask"].min() >= 250
    (reference,) = read["reference_image"]
    assert reference.shape == (32, 48, 3)


def test_a_clients_bytes_are_read_as_the_same_kinds(tmp_path) -> None:
    Mp4Sink().write(np.full((6, 16, 24, 3), 255, np.uint8), tmp_path / "mask.mp4", fps=16)
    data = (tmp_path / "mask.mp4").read_bytes()
    mask = read_input(kinds.MASK, data, "mask (the request's file)", SIZE)
    assert mask.shape == (5, 32, 48) and mask.min() >= 250
    assert read_input(kinds.VIDEO, data, "video", SIZE).shape == (5, 16, 24, 3)  # at its own size
    with pytest.raises(InvalidRequestError, match=r"^mask \(the request's file\) is not an mp4"):
        read_input(kinds.MASK, b"not a video", "mask (the request's file)", SIZE)


def test_reference_is_fitted_and_centred_on_white() -> None:
    canvas = reference_canvas(np.zeros((10, 30, 3), np.uint8), 32, 48)  # 30x10 -> 48x16, rows 8..23
    assert canvas[8:24].max() == 0 and canvas[:8].min() == 255 and canvas[24:].min() == 255


@pytest.mark.parametrize("kind", [kinds.VIDEO, kinds.SIZED_VIDEO, kinds.MASK])
def test_a_short_or_missing_video_is_named(tmp_path, kind) -> None:
    Mp4Sink().write(np.zeros((3, 32, 48, 3), np.uint8), tmp_path / "short.mp4", fps=16)
    with pytest.raises(InvalidRequestError, match=r"short.mp4 has 3 frame\(s\); num_frames=5 needs"):
        read_input(kind, tmp_path / "short.mp4", "--video", SIZE)
    with pytest.raises(InvalidRequestError, match="does not exist"):
        read_input(kind, tmp_path / "missing.mp4", "--video", SIZE)
