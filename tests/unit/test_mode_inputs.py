"""Reading a mode's inputs from files by kind (VACE's): video and mask frames at the requested
count and size, reference images fitted onto a white canvas, and unreadable or short files named."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from wanjax.adapters.media.mode_inputs import decode_input, read_input, reference_canvas
from wanjax.adapters.media.video_files import Mp4Sink
from wanjax.domain.errors import InvalidRequestError
from wanjax.domain.modes.base import InputKind
from wanjax.domain.modes.vace import VACE

SIZE = dict(num_frames=5, height=32, width=48)


def test_video_mask_and_references_are_read_at_the_request_size(tmp_path) -> None:
    grey = np.full((6, 32, 48, 3), 200, np.uint8)
    Mp4Sink().write(grey, tmp_path / "video.mp4", fps=16)
    white = np.full((6, 16, 24, 3), 255, np.uint8)  # half size: stretched to the video's
    Mp4Sink().write(white, tmp_path / "mask.mp4", fps=16)
    Image.fromarray(np.zeros((10, 30, 3), np.uint8)).save(tmp_path / "ref.png")

    given = {"video": tmp_path / "video.mp4", "mask": tmp_path / "mask.mp4", "reference_image": [tmp_path / "ref.png"]}
    kinds = {field.name: field.kind for field in VACE.inputs}
    vace = VACE.from_media({name: read_input(kinds[name], path, **SIZE) for name, path in given.items()})["vace"]
    assert vace.video.shape == (5, 32, 48, 3) and abs(int(vace.video.mean()) - 200) <= 2
    assert vace.mask.shape == (5, 32, 48) and vace.mask.min() >= 250
    (reference,) = vace.references
    assert reference.shape == (32, 48, 3)


def test_a_clients_bytes_are_read_as_the_same_kinds(tmp_path) -> None:
    Mp4Sink().write(np.full((6, 16, 24, 3), 255, np.uint8), tmp_path / "mask.mp4", fps=16)
    data = (tmp_path / "mask.mp4").read_bytes()
    mask = decode_input(InputKind.MASK, data, "mask (the request's file)", **SIZE)
    assert mask.shape == (5, 32, 48) and mask.min() >= 250
    assert decode_input(InputKind.VIDEO, data, "video", **SIZE).shape == (5, 16, 24, 3)  # at its own size


def test_reference_is_fitted_and_centred_on_white() -> None:
    canvas = reference_canvas(np.zeros((10, 30, 3), np.uint8), 32, 48)  # 30x10 -> 48x16, rows 8..23
    assert canvas[8:24].max() == 0 and canvas[:8].min() == 255 and canvas[24:].min() == 255


@pytest.mark.parametrize("kind", [InputKind.VIDEO, InputKind.SIZED_VIDEO, InputKind.MASK])
def test_a_short_or_missing_video_is_named(tmp_path, kind) -> None:
    Mp4Sink().write(np.zeros((3, 32, 48, 3), np.uint8), tmp_path / "short.mp4", fps=16)
    with pytest.raises(InvalidRequestError, match=r"short.mp4 has 3 frame\(s\); num_frames=5 needs"):
        read_input(kind, tmp_path / "short.mp4", **SIZE)
    with pytest.raises(InvalidRequestError, match="does not exist"):
        read_input(kind, tmp_path / "missing.mp4", **SIZE)
