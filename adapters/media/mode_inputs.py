"""Reading a generation mode's input files by their kind (domain/modes/base.InputKind): images,
videos as given or at the requested video size, masks, reference images on their canvas; and,
for checks that need only sizes and lengths (`wanjax plan`, a request at submission), their
shapes from the files' headers and stand-ins of those shapes, nothing decoded."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from wanjax.adapters.media.images import decode_image, image_size, read_image, read_image_size
from wanjax.adapters.media.video_input import (
    decode_video,
    decode_whole_video,
    probe_video,
    probe_whole_video,
    read_video,
    read_whole_video,
)
from wanjax.domain.modes.base import InputKind
from wanjax.domain.requests import MAX_FRAMES


def stretched(frames: np.ndarray, height: int, width: int) -> np.ndarray:
    """Frames uint8 [F, H, W, 3], each stretched to height x width with Lanczos where it differs."""
    from PIL import Image

    if frames.shape[1:3] == (height, width):
        return frames
    lanczos = Image.Resampling.LANCZOS
    return np.stack([np.asarray(Image.fromarray(frame).resize((width, height), resample=lanczos)) for frame in frames])


def reference_canvas(pixels: np.ndarray, height: int, width: int) -> np.ndarray:
    """An image scaled to fit height x width (aspect kept, bilinear) and centred on a white canvas,
    uint8 [height, width, 3], as diffusers' WanVACEPipeline places reference images."""
    from PIL import Image

    image_height, image_width = pixels.shape[:2]
    scale = min(height / image_height, width / image_width)
    size = (int(image_width * scale), int(image_height * scale))
    resized = np.asarray(Image.fromarray(pixels).resize(size, resample=Image.Resampling.BILINEAR))
    canvas = np.full((height, width, 3), 255, np.uint8)
    top, left = (height - size[1]) // 2, (width - size[0]) // 2
    canvas[top : top + size[1], left : left + size[0]] = resized
    return canvas


def read_input(kind: InputKind, given: Path | Sequence[Path], *, num_frames: int, height: int, width: int) -> Any:
    """The pixels of an input field of `kind` given as `given` (a path; paths for a repeatable
    kind), for a video of `num_frames` frames of height x width; an unreadable file is an
    InvalidRequestError naming it."""
    if kind is InputKind.CANVAS_IMAGES:
        return tuple(fitted(kind, read_image(path), height, width)[0] for path in given)
    if kind.is_whole:
        pixels = read_whole_video(given, MAX_FRAMES)
    else:
        pixels = read_video(given, num_frames) if kind.is_video else read_image(given)
    return fitted(kind, pixels, height, width)


def decode_input(kind: InputKind, data: bytes, what: str, *, num_frames: int, height: int, width: int) -> Any:
    """`read_input` of a client's file (one, for every kind): its bytes, `what` naming them in errors."""
    if kind.is_whole:
        pixels = decode_whole_video(data, MAX_FRAMES, what)
    else:
        pixels = decode_video(data, num_frames, what) if kind.is_video else decode_image(data, what)
    return fitted(kind, pixels, height, width)


def probe_input(kind: InputKind, given: Path | Sequence[Path], *, num_frames: int, height: int, width: int) -> Any:
    """What `read_input` gives, as stand-ins (`stand_in`) of the shapes the files' headers give."""
    if kind is InputKind.CANVAS_IMAGES:
        return tuple(stand_in(kind, input_shape(kind, path, num_frames), height, width)[0] for path in given)
    return stand_in(kind, input_shape(kind, given, num_frames), height, width)


def input_shape(kind: InputKind, given: Path | bytes, num_frames: int, what: str = "") -> tuple[int, int, int]:
    """(frames, height, width) of the file of an input of `kind` (a path, or a client's bytes that
    `what` names) as `read_input` or `decode_input` reads it, before any fitting to the video: a
    video's first `num_frames` frames (at least that many) or its every frame, an image one frame.
    Read from headers and, where a container records no frame count, its packets; nothing decoded."""
    what = what or f"{'video' if kind.is_video else 'image'} {given}"
    if kind.is_whole:
        width, height, frames = probe_whole_video(given, MAX_FRAMES, what)
    elif kind.is_video:
        (width, height), frames = probe_video(given, num_frames, what), num_frames
    else:
        size = image_size(given, what) if isinstance(given, bytes) else read_image_size(given)
        (width, height), frames = size, 1
    return frames, height, width


def stand_in(kind: InputKind, shape: tuple[int, int, int], height: int, width: int) -> Any:
    """What `read_input` gives of a file of (frames, height, width) `shape` for a height x width
    video, as a view of one black pixel (the sizes and lengths that checks read, no pixels)."""
    frames, *size = shape
    size = [height, width] if kind.is_fitted else size
    pixels = np.broadcast_to(np.zeros((1, 1, 1, 3), np.uint8), (frames, *size, 3))
    if kind in (InputKind.MASK, InputKind.WHOLE_MASK):
        return pixels[..., 0]
    if kind.is_video:
        return pixels
    return (pixels[0],) if kind is InputKind.CANVAS_IMAGES else pixels[0]


def fitted(kind: InputKind, pixels: np.ndarray, height: int, width: int) -> Any:
    """An image or frames as read -> the pixels of `kind` for a height x width video."""
    if kind in (InputKind.SIZED_VIDEO, InputKind.WHOLE_SIZED_VIDEO):
        return stretched(pixels, height, width)
    if kind in (InputKind.MASK, InputKind.WHOLE_MASK):
        return stretched(pixels, height, width)[..., 0]  # the first channel; white: 255
    if kind is InputKind.CANVAS_IMAGES:
        return (reference_canvas(pixels, height, width),)
    return pixels
