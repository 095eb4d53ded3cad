"""Reading a generation mode's input files by their kind (domain/modes/base.InputKind): images,
videos as given or at the requested video size, masks, reference images on their canvas."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from wanjax.adapters.media.images import read_image
from wanjax.adapters.media.video_input import read_video, read_whole_video
from wanjax.domain.modes.base import InputKind
from wanjax.domain.requests import MAX_FRAMES


def read_frames(path: Path, num_frames: int | None, height: int, width: int) -> np.ndarray:
    """The first `num_frames` frames (None: every frame) of a video file or frame folder
    (`read_video`), RGB uint8 [F, height, width, 3], each stretched to the size with Lanczos where it differs."""
    from PIL import Image

    frames = read_video(path, num_frames) if num_frames is not None else read_whole_video(path, MAX_FRAMES)
    if frames.shape[1:3] == (height, width):
        return frames
    lanczos = Image.Resampling.LANCZOS
    return np.stack([np.asarray(Image.fromarray(frame).resize((width, height), resample=lanczos)) for frame in frames])


def reference_canvas(pixels: np.ndarray, height: int, width: int, fill: int = 255) -> np.ndarray:
    """An image scaled to fit height x width (aspect kept, bilinear) and centred on a canvas of
    `fill` (white), uint8 [height, width, 3], as diffusers' WanVACEPipeline places reference images
    (and, on black, WanAnimatePipeline its character)."""
    from PIL import Image

    image_height, image_width = pixels.shape[:2]
    scale = min(height / image_height, width / image_width)
    size = (int(image_width * scale), int(image_height * scale))
    resized = np.asarray(Image.fromarray(pixels).resize(size, resample=Image.Resampling.BILINEAR))
    canvas = np.full((height, width, 3), fill, np.uint8)
    top, left = (height - size[1]) // 2, (width - size[0]) // 2
    canvas[top : top + size[1], left : left + size[0]] = resized
    return canvas


def read_input(kind: InputKind, given: Path | Sequence[Path], *, num_frames: int, height: int, width: int) -> Any:
    """The pixels of an input field of `kind` given as `given` (a path; paths for a repeatable
    kind), for a video of `num_frames` frames of height x width; an unreadable file is an
    InvalidRequestError naming it."""
    if kind is InputKind.IMAGE:
        return read_image(given)
    if kind is InputKind.VIDEO:
        return read_video(given, num_frames)
    if kind is InputKind.SIZED_VIDEO:
        return read_frames(given, num_frames, height, width)
    if kind is InputKind.MASK:
        return read_frames(given, num_frames, height, width)[..., 0]  # white: 255
    if kind is InputKind.CHARACTER_IMAGE:
        return reference_canvas(read_image(given), height, width, fill=0)
    if kind is InputKind.WHOLE_VIDEO:
        return read_whole_video(given, MAX_FRAMES)
    if kind is InputKind.WHOLE_SIZED_VIDEO:
        return read_frames(given, None, height, width)
    if kind is InputKind.WHOLE_MASK:
        return read_frames(given, None, height, width)[..., 0]  # white: 255
    return tuple(reference_canvas(read_image(path), height, width) for path in given)  # CANVAS_IMAGES
