"""SkyReels-V2 Diffusion Forcing's options, under diffusers' argument names (its three
`SkyReelsV2DiffusionForcing*Pipeline`s' `__call__`): how a long video splits into windows, how the
frames of a window move down the noise schedule, and the noise mixed into the frames a window is
given. The frame rate that picks the fps embedding's row is the request's `fps`."""

from __future__ import annotations

from typing import Any

import attrs

from wanjax.domain.errors import InvalidRequestError
from wanjax.domain.numbers import shown
from wanjax.domain.requests import MAX_FRAMES


def _frames(optional: bool) -> Any:
    def check(_: Any, attribute: attrs.Attribute, value: Any) -> None:
        if optional and value is None:
            return
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_FRAMES:
            what = "none or " if optional else ""
            raise InvalidRequestError(
                f"{attribute.name}={shown(value)}: must be {what}a whole number of frames from 1 to {MAX_FRAMES}"
            )

    return check


def _count(optional: bool, least: int) -> Any:
    def check(_: Any, attribute: attrs.Attribute, value: Any) -> None:
        if optional and value is None:
            return
        if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= 1000:
            what = "none or " if optional else ""
            raise InvalidRequestError(f"{attribute.name}={shown(value)}: must be {what}a whole number from {least} to 1000")

    return check


def _noise_level(_: Any, attribute: attrs.Attribute, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1000:
        raise InvalidRequestError(
            f"{attribute.name}={shown(value)}: must be a number from 0 (none) below 1000; SkyReels-V2 suggests 20, "
            "at most 50"
        )


@attrs.frozen(kw_only=True)
class DiffusionForcingOptions:
    base_num_frames: int = attrs.field(default=97, validator=_frames(False))
    """Pixel frames the model denoises at once: a longer video runs in windows of this many
    (diffusers' default 97; SkyReels-V2 uses 97 at 540P, 121 at 720P)."""
    overlap_history: int | None = attrs.field(default=None, validator=_frames(True), metadata={"parse": int})
    """Pixel frames each window after the first takes from the video so far (needed beyond
    base_num_frames; SkyReels-V2 suggests 17 or 37)."""
    ar_step: int = attrs.field(default=0, validator=_count(False, 0))
    """0: every frame of a window moves down the schedule together; n > 0: each causal block starts
    n steps after the one before (asynchronous, slower; SkyReels-V2 suggests 5)."""
    causal_block_size: int | None = attrs.field(default=None, validator=_count(True, 1), metadata={"parse": int})
    """Latent frames per causal block (none: the model's `num_frame_per_block`; SkyReels-V2 suggests
    5 with ar_step 5)."""
    addnoise_condition: float = attrs.field(default=0.0, validator=_noise_level)
    """Noise mixed into the frames a window is given, as a timestep (0: none; SkyReels-V2 suggests
    20 for long videos)."""
