"""Reading VACE inputs from files: video and mask frames at the requested count and size,
reference images fitted onto a white canvas, and unreadable or short files named."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from wanjax.adapters.media.vace_inputs import read_vace_inputs, reference_canvas
from wanjax.adapters.media.video_files import Mp4Sink
from wanjax.domain.errors import InvalidRequestError


def test_video_mask_and_references_are_read_at_the_request_size(tmp_path) -> None:
    grey = np.full((6, 32, 48, 3), 200, np.uint8)
    Mp4Sink().write(grey, tmp_path / "video.mp4", fps=16)
    white = np.full((6, 16, 24, 3), 255, np.uint8)  # half size: stretched to the video's
    Mp4Sink().write(white, tmp_path / "mask.mp4", fps=16)
    Image.fromarray(np.zeros((10, 30, 3), np.uint8)).save(tmp_path / "ref.png")

    vace = read_vace_inputs(
        tmp_path / "video.mp4", tmp_path / "mask.mp4", [tmp_path / "ref.png"], num_frames=5, height=32, width=48
    )
    assert vace.video.shape == (5, 32, 48, 3) and abs(int(vace.video.mean()) - 200) <= 2
    assert vace.mask.shape == (5, 32, 48) and vace.mask.min() >= 250
    (reference,) = vace.references
    assert reference.shape == (32, 48, 3)


def test_reference_is_fitted_and_centred_on_white() -> None:
    canvas = reference_canvas(np.zeros((10, 30, 3), np.uint8), 32, 48)  # 30x10 -> 48x16, rows 8..23
    assert canvas[8:24].max() == 0 and canvas[:8].min() == 255 and canvas[24:].min() == 255


def test_no_inputs_is_none_and_a_short_video_is_named(tmp_path) -> None:
    assert read_vace_inputs(None, None, [], num_frames=5, height=32, width=48) is None
    Mp4Sink().write(np.zeros((3, 32, 48, 3), np.uint8), tmp_path / "short.mp4", fps=16)
    with pytest.raises(InvalidRequestError, match=r"short.mp4 has 3 frame\(s\); num_frames=5 needs"):
        read_vace_inputs(tmp_path / "short.mp4", None, [], num_frames=5, height=32, width=48)
    with pytest.raises(InvalidRequestError, match="does not exist"):
        read_vace_inputs(tmp_path / "missing.mp4", None, [], num_frames=5, height=32, width=48)
