"""The reader of images and videos (domain/inputs/kinds.PixelKind): images, videos as given or at
the requested video size, masks, reference images on their canvas; probes are (frames, height,
width) of the file as read, from headers, nothing decoded."""

from __future__ import annotations

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
from wanjax.domain.errors import InvalidRequestError
from wanjax.domain.inputs.kinds import PixelKind
from wanjax.domain.inputs.reader import VideoSize
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


class PixelReader:
    """Images (png/jpg; a client's: png/jpg/webp) and videos (a file PyAV reads or a folder of
    frames; a client's: mp4/mov/mkv/webm). A file's errors name it by `named` (the CLI's flag, then
    the path; or the HTTP field and "the request's file")."""

    def probe(self, kind: PixelKind, source: Path | bytes, named: str, size: VideoSize) -> tuple[int, int, int]:
        """(frames, height, width) of the file as read, before any fitting to the video: a video's
        first num_frames frames (at least that many) or its every frame, an image one frame. Read
        from headers and, where a container records no frame count, its packets."""
        what = named if isinstance(source, bytes) else f"{named} {source}"
        if kind.video and not kind.whole:
            _check_frame_count(size.num_frames)
        if kind.whole:
            width, height, frames = probe_whole_video(source, MAX_FRAMES, what)
        elif kind.video:
            (width, height), frames = probe_video(source, size.num_frames, what), size.num_frames
        else:
            (width, height) = image_size(source, what) if isinstance(source, bytes) else read_image_size(source, named)
            frames = 1
        return frames, height, width

    def check(self, kind: PixelKind, probe: tuple[float, ...], named: str, size: VideoSize) -> None:
        """Nothing beyond the probe's own refusals (a video too short for num_frames)."""

    def decode(self, kind: PixelKind, source: Path | bytes, named: str, size: VideoSize) -> Any:
        if kind.video and not kind.whole:
            _check_frame_count(size.num_frames)
        if isinstance(source, bytes):
            if kind.whole:
                pixels = decode_whole_video(source, MAX_FRAMES, named)
            else:
                pixels = decode_video(source, size.num_frames, named) if kind.video else decode_image(source, named)
        elif kind.whole:
            pixels = read_whole_video(source, MAX_FRAMES, named)
        else:
            pixels = read_video(source, size.num_frames, named) if kind.video else read_image(source, named)
        return _fitted(kind, pixels, size)

    def stand_in(self, kind: PixelKind, probe: tuple[float, ...], size: VideoSize) -> Any:
        """A view of one black pixel in the shape `decode` gives."""
        frames, *sides = (int(value) for value in probe)
        sides = [size.height, size.width] if kind.fitted else sides
        pixels = np.broadcast_to(np.zeros((1, 1, 1, 3), np.uint8), (frames, *sides, 3))
        if kind.mask:
            return pixels[..., 0]
        return pixels if kind.video else pixels[0]


def _fitted(kind: PixelKind, pixels: np.ndarray, size: VideoSize) -> Any:
    """An image or frames as read -> the pixels of `kind` for the video of `size`."""
    if kind.canvas:
        return reference_canvas(pixels, size.height, size.width)
    if kind.fitted:
        frames = stretched(pixels, size.height, size.width)
        return frames[..., 0] if kind.mask else frames  # a mask's first channel; white: 255
    return pixels


def _check_frame_count(num_frames: Any) -> None:
    if not isinstance(num_frames, int) or isinstance(num_frames, bool) or num_frames < 1:
        raise InvalidRequestError(f"num_frames={num_frames!r}: must be a positive integer of the form 4k+1")
