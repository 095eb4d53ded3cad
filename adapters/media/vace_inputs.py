"""Reading the inputs of a VACE generation: a control video, a mask video and reference
images, as the pixels `VaceInputs` holds at the requested video size."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from wanjax.adapters.media.images import read_image
from wanjax.adapters.media.video_input import read_video
from wanjax.domain.vace import VaceInputs


def read_frames(path: Path, num_frames: int, height: int, width: int) -> np.ndarray:
    """The first `num_frames` frames of a video file or frame folder (`read_video`), RGB uint8
    [F, height, width, 3], each stretched to the size with Lanczos where it differs."""
    from PIL import Image

    frames = read_video(path, num_frames)
    if frames.shape[1:3] == (height, width):
        return frames
    lanczos = Image.Resampling.LANCZOS
    return np.stack([np.asarray(Image.fromarray(frame).resize((width, height), resample=lanczos)) for frame in frames])


def reference_canvas(pixels: np.ndarray, height: int, width: int) -> np.ndarray:
    """An image scaled to fit height x width (aspect kept, bilinear) and centred on a white
    canvas, uint8 [height, width, 3], as diffusers' WanVACEPipeline places reference images."""
    from PIL import Image

    image_height, image_width = pixels.shape[:2]
    scale = min(height / image_height, width / image_width)
    size = (int(image_width * scale), int(image_height * scale))
    resized = np.asarray(Image.fromarray(pixels).resize(size, resample=Image.Resampling.BILINEAR))
    canvas = np.full((height, width, 3), 255, np.uint8)
    top, left = (height - size[1]) // 2, (width - size[0]) // 2
    canvas[top : top + size[1], left : left + size[0]] = resized
    return canvas


def read_vace_inputs(
    video: Path | None, mask: Path | None, references: Sequence[Path], *, num_frames: int, height: int, width: int
) -> VaceInputs | None:
    """The VACE inputs of the given files (None when none is given); the mask video's first
    channel is the mask (white: regenerate)."""
    if video is None and mask is None and not references:
        return None
    return VaceInputs(
        video=None if video is None else read_frames(video, num_frames, height, width),
        mask=None if mask is None else read_frames(mask, num_frames, height, width)[..., 0],
        references=tuple(reference_canvas(read_image(path), height, width) for path in references),
    )
