"""Wan 2.2 Animate's inputs and arithmetic, pure host numbers: how a driving video splits into segments,
how short inputs are padded, and the conditioning masks (diffusers' WanAnimatePipeline).

A video of N driving frames runs as segments of `segment_frame_length` (L) frames; segment
k > 0 starts `prev_segment_conditioning_frames` (P) frames before segment k-1 ended and takes
those P generated frames as its conditioning, so each segment adds L - P new frames. The
driving videos are padded to the frames the segments cover by walking back and forth through
them (1 2 3 4 5 4 3 2 1 2 ...), and the output is cut back to N frames.

Mode "animate" makes the character of a reference image move; "replace" puts it into a
background video where a mask (1: the character's region) says.
"""

from __future__ import annotations

import attrs
import numpy as np

from wanjax.domain.errors import InvalidRequestError
from wanjax.domain.inputs.fields import InputRefusal
from wanjax.domain.modes.animate.inputs import NAMES

PREV_SEGMENT_CONDITIONING_FRAMES = (1, 5)
"""The conditioning lengths diffusers accepts (the official code's `refert_num` too)."""


@attrs.frozen
class Segments:
    """The segment layout of `frames` driving frames (see the module docstring)."""

    frames: int
    length: int
    overlap: int

    def __attrs_post_init__(self) -> None:
        if self.overlap not in PREV_SEGMENT_CONDITIONING_FRAMES:
            raise InvalidRequestError(
                f"prev_segment_conditioning_frames={self.overlap}: must be one of "
                f"{', '.join(map(str, PREV_SEGMENT_CONDITIONING_FRAMES))} (as diffusers and the official code)"
            )
        if self.length <= self.overlap or (self.length - 1) % 4:
            raise InvalidRequestError(
                f"segment_frame_length={self.length}: must be 4k + 1 frames (the VAE's temporal compression) and "
                f"longer than prev_segment_conditioning_frames={self.overlap}, e.g. 77"
            )
        if self.frames <= self.overlap:
            raise InvalidRequestError(
                f"the pose video has {self.frames} frame(s); Animate needs more than "
                f"prev_segment_conditioning_frames={self.overlap}"
            )

    @property
    def step(self) -> int:
        """New frames per segment."""
        return self.length - self.overlap

    @property
    def count(self) -> int:
        return -(-(self.frames - self.overlap) // self.step)

    @property
    def padded_frames(self) -> int:
        """Driving frames the segments cover (the inputs are padded to this many)."""
        return self.count * self.step + self.overlap

    def starts(self) -> range:
        """Each segment's first driving frame."""
        return range(0, self.count * self.step, self.step)


def reflect_padded(frames: np.ndarray, count: int) -> np.ndarray:
    """frames [N, ...] walked back and forth (1 2 3 2 1 2 ...) to `count` frames (diffusers'
    `pad_video_frames`; one frame repeats)."""
    n = len(frames)
    if n == 1:
        return np.repeat(frames, count, axis=0)
    period = 2 * (n - 1)
    index = np.arange(count) % period
    return frames[np.where(index < n, index, period - index)]


def frame_mask_channels(mask: np.ndarray, temporal: int) -> np.ndarray:
    """mask [F, h, w] over pixel frames (F = temporal * (F' - 1) + 1) -> [F', h, w, temporal]: frame 0
    repeated to fill latent frame 0's slots, then one pixel frame per slot (diffusers' get_i2v_mask)."""
    mask = np.concatenate([np.repeat(mask[:1], temporal, axis=0), mask[1:]])
    latent_frames = mask.shape[0] // temporal
    return mask.reshape(latent_frames, temporal, *mask.shape[1:]).transpose(0, 2, 3, 1)


def segment_mask(
    frames: int, height: int, width: int, temporal: int, given: int, character: np.ndarray | None = None
) -> np.ndarray:
    """[F', h, w, temporal] float32: which pixels of a segment's conditioning video the model keeps
    (1) or makes (0). The first `given` frames (the previous segment's) are kept; in "replace" mode
    so is the background outside `character` ([frames, h, w] in {0, 1}, at latent resolution)."""
    mask = np.zeros((frames, height, width), np.float32) if character is None else 1.0 - character
    mask = mask.astype(np.float32)
    mask[:given] = 1.0
    return frame_mask_channels(mask, temporal)


def nearest_resized(mask: np.ndarray, height: int, width: int) -> np.ndarray:
    """mask [F, H, W] -> [F, height, width] by nearest neighbour (torch's "nearest": floor(i * H / height))."""
    rows = np.floor(np.arange(height) * (mask.shape[1] / height)).astype(int)
    cols = np.floor(np.arange(width) * (mask.shape[2] / width)).astype(int)
    return mask[:, rows][:, :, cols]


DEFAULT_SEGMENT_FRAME_LENGTH = 77
"""diffusers' WanAnimatePipeline default (the official code's clip_len)."""
DEFAULT_PREV_SEGMENT_CONDITIONING_FRAMES = 1
"""diffusers' default; the official WanAnimate.generate's `refert_num` defaults to 1 as well."""


@attrs.frozen(kw_only=True, eq=False)
class AnimateVideos:
    """The driving inputs of a Wan 2.2 Animate request, already extracted (pose rendering and face
    crops are made outside wanjax, as diffusers' pipeline takes them): a pose video at the request's
    size and a face video at any size (RGB uint8; the run stretches it to the model's face size, as
    diffusers does), and for "replace" a background video with a mask of the character's region
    ([N, H, W] float in [0, 1]), both at the request's size. Every video is padded or cut to the
    segments' frames as diffusers does."""

    pose: np.ndarray
    face: np.ndarray
    background: np.ndarray | None = None
    mask: np.ndarray | None = None

    def __attrs_post_init__(self) -> None:
        if (self.background is None) != (self.mask is None):
            raise InputRefusal(
                "replacing a person needs both {background_video} and {mask} (the character's region); "
                "give both, or neither to animate the character alone", **NAMES,
            )

    def check_size(self, height: int, width: int) -> None:
        """The pose video, background and mask must be at the request's size (`--pose-video` and the
        others are read at it)."""
        for name, frames in (("pose_video", self.pose), ("background_video", self.background), ("mask", self.mask)):
            if frames is not None and frames.shape[1:3] != (height, width):
                raise InputRefusal(
                    f"{{given}}: its frames are {frames.shape[2]}x{frames.shape[1]}, the video {width}x{height}; "
                    "give it at the video's size", given=NAMES[name],
                )
