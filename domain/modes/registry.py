"""The one table of generation modes, and which mode a request runs in.

The service, the CLI, the HTTP API, the memory plan and the bench read `MODES`; a new mode is
its own module and one line here. Order matters: a request runs in the first mode whose
fields it sets (`GenerationMode.given`), else in the first mode that is the model's default
(`default_on`), else in text-to-video.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import TYPE_CHECKING

import attrs

from wanjax.domain.errors import InvalidRequestError
from wanjax.domain.modes.animate.mode import ANIMATE
from wanjax.domain.modes.base import GenerationMode, InputField, InputKind, ModelTraits
from wanjax.domain.modes.first_last_frame import FIRST_LAST_FRAME
from wanjax.domain.modes.image_to_video import IMAGE_TO_VIDEO
from wanjax.domain.modes.text_to_video import TEXT_TO_VIDEO
from wanjax.domain.modes.vace import VACE
from wanjax.domain.modes.video_to_video import VIDEO_TO_VIDEO
from wanjax.domain.numbers import shown

if TYPE_CHECKING:
    from wanjax.domain.requests import GenerationRequest

MODES: tuple[GenerationMode, ...] = (
    ANIMATE,
    VACE,
    VIDEO_TO_VIDEO,
    FIRST_LAST_FRAME,
    IMAGE_TO_VIDEO,
    TEXT_TO_VIDEO,
)


def requested_mode(request: GenerationRequest) -> GenerationMode:
    """The mode whose fields `request` sets; text-to-video where it sets none (no model asked)."""
    return next((mode for mode in MODES if mode.given(request)), TEXT_TO_VIDEO)


def mode_for(request: GenerationRequest, model: ModelTraits) -> GenerationMode:
    """The mode `request` runs in on `model`, checked: InvalidRequestError, naming the fix, where the
    model cannot run it."""
    mode = resolved_mode(request, model)
    check_settings(request, mode)
    mode.check_model(model)
    mode.check(request, model)
    return mode


def check_settings(request: GenerationRequest, mode: GenerationMode) -> None:
    """InvalidRequestError for a setting of another mode than `mode` (the one `request` runs in) that
    `request` sets to other than its default: nothing would read it."""
    defaults = {field.name: field.default for field in attrs.fields(type(request))}
    for other in MODES:
        for name in other.settings if other is not mode else ():
            if getattr(request, name) != defaults[name]:
                raise InvalidRequestError(
                    f"{name}={shown(getattr(request, name))}: a setting of the {other.name} mode; this request runs in "
                    f"{mode.name} on this model, which would not read it: leave it out"
                )


def resolved_mode(request: GenerationRequest, model: ModelTraits) -> GenerationMode:
    """The mode `request` runs in on `model`, unchecked (what the memory plan counts)."""
    mode = requested_mode(request)
    return default_mode(model) if mode is TEXT_TO_VIDEO else mode


def default_mode(model: ModelTraits) -> GenerationMode:
    """The mode a request without inputs runs in on `model` (what the bench runs)."""
    return next((mode for mode in MODES if mode.default_on(model)), TEXT_TO_VIDEO)


def mode_of_inputs(
    names: Collection[str], model: Callable[[], ModelTraits] | None, *, over_http: bool = False
) -> GenerationMode:
    """The mode that takes the input fields `names` (as the CLI's flags give them; with `over_http`,
    as the HTTP API's file fields do); where several do (`--video`: video-to-video or VACE), the
    model's default among them (`model` is asked only then), else the one of fewest inputs (`image`
    over HTTP: image-to-video's, not Animate's, whose character comes with its videos)."""
    takers = [mode for mode in MODES if set(names) <= _names(mode, over_http)]
    if not takers:
        # the mode that takes most of them (the fewest inputs of its own first) names what to drop
        nearest = max(MODES, key=lambda mode: (len(set(names) & _names(mode, over_http)), -len(mode.inputs)))
        flags = {field.name: field.flag for field in input_fields()}
        taken = " and ".join(flags[name] for name in names if name in _names(nearest, over_http))
        dropped = " and ".join(flags[name] for name in names if name not in _names(nearest, over_http))
        raise InvalidRequestError(
            f"no one generation mode takes {' with '.join(flags[name] for name in names)}: {nearest.name} takes "
            f"{taken}; drop {dropped}, or give the inputs of one mode (`wanjax generate --help`)"
        )
    if len(takers) > 1:
        defaults = [] if model is None else [mode for mode in takers if mode.default_on(model())]
        takers = defaults or sorted(takers, key=lambda mode: len(mode.inputs))
    return takers[0]


def _names(mode: GenerationMode, over_http: bool = False) -> set[str]:
    return {field.name for field in mode.inputs if field.http or not over_http}


def input_fields() -> tuple[InputField, ...]:
    """Every mode's input fields, one per CLI flag (the first mode's that names it)."""
    fields: dict[str, InputField] = {}
    for mode in MODES:
        for field in mode.inputs:
            fields.setdefault(field.flag, field)
    return tuple(fields.values())


def input_kind(name: str) -> InputKind | None:
    """The kind of the input `name` of a registered mode (None: no mode's)."""
    return next((field.kind for mode in MODES for field in mode.inputs if field.name == name), None)


def flag_help(flag: str) -> str:
    """The CLI help of `flag`: each mode's, joined, each text once (first-last-frame's `--image` is
    image-to-video's)."""
    return "; ".join(dict.fromkeys(field.help for mode in MODES for field in mode.inputs if field.flag == flag))


def http_fields() -> dict[str, InputField]:
    """The HTTP API's file fields -> the input each fills."""
    return {field.http: field for mode in MODES for field in mode.inputs if field.http is not None}
