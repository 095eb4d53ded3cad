"""Wan 2.2 Animate's options: how the driving video splits into segments."""

from __future__ import annotations

from typing import Any

import attrs

from wanjax.domain.errors import InvalidRequestError
from wanjax.domain.modes.animate.videos import (
    DEFAULT_PREV_SEGMENT_CONDITIONING_FRAMES,
    DEFAULT_SEGMENT_FRAME_LENGTH,
    PREV_SEGMENT_CONDITIONING_FRAMES,
)
from wanjax.domain.numbers import shown
from wanjax.domain.requests import MAX_FRAMES


def _segment_length(_: Any, attribute: attrs.Attribute, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 5 <= value <= MAX_FRAMES or value % 4 != 1:
        raise InvalidRequestError(
            f"{attribute.name}={shown(value)}: must be an integer 4k+1 from 5 to {MAX_FRAMES}: a Wan Animate "
            "segment's frames, e.g. 77"
        )


def _segment_overlap(_: Any, attribute: attrs.Attribute, value: int) -> None:
    if isinstance(value, bool) or value not in PREV_SEGMENT_CONDITIONING_FRAMES:
        choices = " or ".join(map(str, PREV_SEGMENT_CONDITIONING_FRAMES))
        raise InvalidRequestError(
            f"{attribute.name}={shown(value)}: must be {choices}: the frames a Wan Animate segment takes from the last one"
        )


@attrs.frozen(kw_only=True)
class AnimateOptions:
    segment_frame_length: int = attrs.field(default=DEFAULT_SEGMENT_FRAME_LENGTH, validator=_segment_length)
    """Pixel frames per segment (4k + 1; diffusers' WanAnimatePipeline default)."""
    prev_segment_conditioning_frames: int = attrs.field(
        default=DEFAULT_PREV_SEGMENT_CONDITIONING_FRAMES, validator=_segment_overlap
    )
    """The previous segment's last frames each segment starts from (1 or 5)."""
