"""Wan 2.2 Animate's character on a black canvas of the video's size, as each reference puts it there.

- official (`wan/animate.py`, `WanAnimate.padding_resize`): the side that fills the canvas is the
  canvas's, the other `int(side * scale)` (truncated), resized with OpenCV's `INTER_LINEAR` and
  pasted at `int((canvas - side) / 2)`;
- diffusers (`WanAnimatePipeline`, its `WanAnimateImageProcessor` with `resize_mode="fill"`): the
  other side `side * canvas // other` (floored, in integers), resized with PIL's Lanczos (the
  pipeline asks for bilinear, but the processor's `__init__` registers its defaults over it: run,
  its config says `resample="lanczos"`) and pasted at `canvas // 2 - side // 2`.

`linear_resize` computes OpenCV's `INTER_LINEAR` for uint8 images, bit for bit (OpenCV's fixed
point arithmetic: weights in 2048ths, rows combined as its vector code does), so that the official
canvas needs no OpenCV here; tests/unit/test_character_canvas.py holds it to OpenCV itself.
"""

from __future__ import annotations

import numpy as np

from wanjax.domain.scheduling.flow_sigmas import SIGMA_SCHEDULES

WEIGHT_ONE = 2048  # OpenCV's INTER_RESIZE_COEF_SCALE: a weight of 1 in its fixed point


def character_canvas(image: np.ndarray, height: int, width: int, reference: str) -> np.ndarray:
    """RGB uint8 `image` [h, w, 3] letterboxed onto black [height, width, 3] as `reference` does: a
    value of `sigma_schedule`, the setting that names the reference a run reproduces."""
    if reference == "official":
        return _official_canvas(image, height, width)
    if reference == "diffusers":
        return _diffusers_canvas(image, height, width)
    raise ValueError(f"reference={reference!r}: must be one of {', '.join(SIGMA_SCHEDULES)}")


def _official_canvas(image: np.ndarray, height: int, width: int) -> np.ndarray:
    image_height, image_width = image.shape[:2]
    canvas = np.zeros((height, width, 3), np.uint8)
    if image_height / image_width > height / width:  # taller than the canvas: full height
        side = int(height / image_height * image_width)
        left = int((width - side) / 2)
        canvas[:, left : left + side] = linear_resize(image, height, side)
    else:
        side = int(width / image_width * image_height)
        top = int((height - side) / 2)
        canvas[top : top + side] = linear_resize(image, side, width)
    return canvas


def _diffusers_canvas(image: np.ndarray, height: int, width: int) -> np.ndarray:
    from PIL import Image

    image_height, image_width = image.shape[:2]
    wider = width / height < image_width / image_height
    side_width = width if wider else image_width * height // image_height
    side_height = height if not wider else image_height * width // image_width
    resized = Image.fromarray(image).resize((side_width, side_height), resample=Image.Resampling.LANCZOS)
    canvas = Image.new("RGB", (width, height), color=0)
    canvas.paste(resized, box=(width // 2 - side_width // 2, height // 2 - side_height // 2))
    return np.asarray(canvas)


def linear_resize(image: np.ndarray, height: int, width: int) -> np.ndarray:
    """uint8 [h, w, C] -> [height, width, C] as OpenCV's `cv2.resize(image, (width, height),
    interpolation=cv2.INTER_LINEAR)`: pixel centres aligned, two taps a side, no antialiasing."""
    columns, column_weights = _taps(image.shape[1], width, clamp_weights=True)
    rows, row_weights = _taps(image.shape[0], height, clamp_weights=False)
    pixels = image.astype(np.int32)
    across = pixels[:, columns[0]] * column_weights[0][:, None] + pixels[:, columns[1]] * column_weights[1][:, None]
    # the vertical pass as OpenCV's vector code does it: each row >> 4, times its weight, >> 16, summed, rounded >> 2
    top, bottom = (across[index] >> 4 for index in rows)
    upper = (top * row_weights[0][:, None, None]) >> 16
    lower = (bottom * row_weights[1][:, None, None]) >> 16
    return np.clip((upper + lower + 2) >> 2, 0, 255).astype(np.uint8)


def _taps(source: int, target: int, *, clamp_weights: bool) -> tuple[tuple[np.ndarray, ...], tuple[np.ndarray, ...]]:
    """For each of `target` outputs, the two source indices it reads and their fixed-point weights,
    computed in float32 as OpenCV does. Past an edge the index is clamped; across the image
    (`clamp_weights`) its weight moves onto the edge pixel too, down the image only the index
    moves (OpenCV's two passes differ so)."""
    scale = 1.0 / (target / source)
    position = ((np.arange(target) + 0.5) * scale - 0.5).astype(np.float32)
    first = np.floor(position)
    fraction = position - first
    first = first.astype(np.int64)
    if clamp_weights:
        outside = (first < 0) | (first >= source - 1)
        fraction = np.where(outside, np.float32(0), fraction)
        first = np.clip(first, 0, source - 1)
    weights = (np.float32(1) - fraction) * np.float32(WEIGHT_ONE), fraction * np.float32(WEIGHT_ONE)
    indices = np.clip(first, 0, source - 1), np.clip(first + 1, 0, source - 1)
    return indices, tuple(np.rint(weight).astype(np.int32) for weight in weights)
