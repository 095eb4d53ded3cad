"""What a mode input holds once read: its kind names the reader that reads its file
(adapters/media/readers.py) and checks the value a request carries (pure host arrays).

Kinds are an open set: a new kind is a subclass of `InputKind` here or in a mode's own module,
and one reader registered for its `reader` name.
"""

from __future__ import annotations

from typing import Any, ClassVar

import attrs
import numpy as np

from wanjax.domain.errors import InvalidRequestError


class InputKind:
    """A kind of input. `reader`: the registered reader's name; `repeatable`: its flag may be
    given more than once (the value is then a tuple, one entry per file)."""

    reader: str = ""
    repeatable: bool = False

    def check(self, name: str, value: Any) -> None:
        """InvalidRequestError, naming input `name`, where `value` is not what this kind gives."""
        raise NotImplementedError

    def probe_of(self, value: Any) -> tuple[float, ...]:
        """What the reader's probe would give of the file `value` was read from (a job's record)."""
        raise NotImplementedError


@attrs.frozen
class PixelKind(InputKind):
    """Images and videos, RGB uint8 (masks: one channel).

    video: its file is a video (frames [F, H, W, ...]), not an image [H, W, ...];
    whole: every frame of the video is read, however many (else its first num_frames);
    fitted: its pixels are at the request's size whatever its file's (stretched, or on a canvas);
    mask: the first channel only (white: 255); canvas: each image fitted onto a white canvas
    (a repeatable input). Probes are (frames, height, width) of the file as read, before fitting."""

    video: bool = False
    whole: bool = False
    fitted: bool = False
    mask: bool = False
    canvas: bool = False
    reader: ClassVar[str] = "pixels"

    @property
    def repeatable(self) -> bool:  # type: ignore[override]
        return self.canvas

    def check(self, name: str, value: Any) -> None:
        if self.canvas:
            if not isinstance(value, tuple):
                raise InvalidRequestError(f"{name}: must be a tuple of images, uint8 arrays [H, W, 3]")
            for image in value:
                IMAGE.check(name, image)
            return
        what, layout = ("a mask", "[F, H, W]") if self.mask else ("RGB frames", "[F, H, W, 3]")
        if not self.video:
            what, layout = "RGB pixels", "[H, W, 3]"
        ndim, rgb = layout.count(",") + 1, layout.endswith("3]")
        if not isinstance(value, np.ndarray) or value.dtype != np.uint8 or value.ndim != ndim or (
            rgb and value.shape[-1] != 3
        ):
            given = f"<{type(value).__name__} {getattr(value, 'shape', None)}>"
            raise InvalidRequestError(f"{name}={given}: must be {what}, a uint8 array {layout}")
        if min(value.shape) < 1:
            raise InvalidRequestError(f"{name}=<array {value.shape}>: is empty")

    def probe_of(self, value: Any) -> tuple[float, ...]:
        value = value[0] if self.canvas else value
        return tuple(value.shape[:3]) if self.video else (1, *value.shape[:2])


IMAGE = PixelKind()
"""One png/jpg, RGB uint8 [H, W, 3] at its own size."""
VIDEO = PixelKind(video=True)
"""An mp4 or a frame folder: its first num_frames frames, uint8 [F, H, W, 3] at its own size."""
SIZED_VIDEO = PixelKind(video=True, fitted=True)
"""A VIDEO stretched to the request's size."""
MASK = PixelKind(video=True, fitted=True, mask=True)
"""A SIZED_VIDEO's first channel, uint8 [F, H, W] (white: 255)."""
CANVAS_IMAGES = PixelKind(fitted=True, canvas=True)
"""Repeatable IMAGEs, each fitted onto a white canvas of the request's size (a tuple)."""
WHOLE_VIDEO = PixelKind(video=True, whole=True)
"""A VIDEO's every frame (however many), at its own size."""
WHOLE_SIZED_VIDEO = PixelKind(video=True, whole=True, fitted=True)
"""A WHOLE_VIDEO stretched to the request's size."""
WHOLE_MASK = PixelKind(video=True, whole=True, fitted=True, mask=True)
"""A WHOLE_SIZED_VIDEO's first channel, uint8 [F, H, W] (white: 255)."""
