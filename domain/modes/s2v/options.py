"""Wan 2.2 S2V's options, under the official `WanS2V.generate` names: the frames of a clip and how
many clips at most."""

from __future__ import annotations

from typing import Any

import attrs

from wanjax.domain.errors import InvalidRequestError
from wanjax.domain.numbers import shown
from wanjax.domain.requests import MAX_FRAMES

DEFAULT_INFER_FRAMES = 80
"""`WanS2V.generate(infer_frames=80)` ("should be 4n")."""


def _infer_frames(_: Any, attribute: attrs.Attribute, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 4 <= value <= MAX_FRAMES or value % 4:
        raise InvalidRequestError(
            f"{attribute.name}={shown(value)}: must be a multiple of 4 from 4 to {MAX_FRAMES}: the frames of one "
            "Wan S2V clip, e.g. 80"
        )


def _num_repeat(_: Any, attribute: attrs.Attribute, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidRequestError(
            f"{attribute.name}={shown(value)}: must be a whole number: the most Wan S2V clips to make "
            "(0: until the audio ends)"
        )


@attrs.frozen(kw_only=True)
class S2VOptions:
    infer_frames: int = attrs.field(default=DEFAULT_INFER_FRAMES, validator=_infer_frames)
    """Pixel frames per clip (a multiple of 4; `WanS2V.generate`'s default 80)."""
    num_repeat: int = attrs.field(default=0, validator=_num_repeat)
    """The most clips to make; 0 (the default): as many as the audio gives, as `WanS2V.generate`
    with num_repeat=None does (its own default of 1 is the repository CLI's to override)."""
