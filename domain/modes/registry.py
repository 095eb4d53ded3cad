"""The one table of generation modes, and which mode a request runs in.

The service, the CLI, the HTTP API, the memory plan and the bench read `MODES`; a new mode is
its own module and one line here. Order matters: a request runs in the first mode whose
inputs it gives (`GenerationMode.given`), else in the first mode that is the model's default
(`default_on`), else in text-to-video. A request's options are those of the mode it runs in.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any

import attrs

from wanjax.domain.errors import InvalidRequestError
from wanjax.domain.inputs.fields import Entrypoint, InputField, InputRefusal
from wanjax.domain.modes.animate.mode import ANIMATE
from wanjax.domain.modes.base import GenerationMode, ModelTraits
from wanjax.domain.modes.diffusion_forcing.mode import DIFFUSION_FORCING
from wanjax.domain.modes.first_last_frame import FIRST_LAST_FRAME
from wanjax.domain.modes.image_to_video import IMAGE_TO_VIDEO
from wanjax.domain.modes.s2v.mode import SPEECH_TO_VIDEO
from wanjax.domain.modes.text_to_video import TEXT_TO_VIDEO
from wanjax.domain.modes.vace import VACE
from wanjax.domain.modes.video_to_video import VIDEO_TO_VIDEO
from wanjax.domain.numbers import shown
from wanjax.domain.requests import GenerationRequest

MODES: tuple[GenerationMode, ...] = (
    SPEECH_TO_VIDEO,
    ANIMATE,
    VACE,
    VIDEO_TO_VIDEO,
    FIRST_LAST_FRAME,
    IMAGE_TO_VIDEO,
    DIFFUSION_FORCING,
    TEXT_TO_VIDEO,
)


def requested_mode(request: GenerationRequest) -> GenerationMode:
    """The mode whose inputs `request` gives; text-to-video where it gives none (no model asked). A
    request holding the options of a mode that no input selects (Diffusion Forcing) and that takes
    every input it gives runs in that mode."""
    owner = next((mode for mode in MODES if mode.options is not None and isinstance(request.options, mode.options)), None)
    if owner is not None and not owner.selected_by and owner.takes(request.inputs):
        return owner
    return next((mode for mode in MODES if mode.given(request)), TEXT_TO_VIDEO)


def check_request(request: GenerationRequest) -> GenerationMode:
    """The mode `request` asks for, its inputs and options checked against it (each input one of
    the mode's, its value what its kind gives; options of a mode its inputs select, that mode's) and
    the mode's rules (`check_request`: no model needed); InvalidRequestError naming the fix."""
    mode = requested_mode(request)
    for name, value in request.inputs.items():
        field = next((field for field in mode.inputs if field.name == name), None)
        if field is None:
            _refuse_input(name, mode)
        field.kind.check(name, value)
    if mode is not TEXT_TO_VIDEO:  # a request without inputs runs in the model's mode, its options checked then
        _check_options(request, mode, "")
    mode.check_request(request)
    return mode


def _check_options(request: GenerationRequest, mode: GenerationMode, where: str) -> None:
    """InvalidRequestError where `request` holds options of another mode than `mode`, the one it
    runs in (`where`: on what): nothing would read them."""
    options = request.options
    if options is None or (mode.options is not None and isinstance(options, mode.options)):
        return
    owner = next((other for other in MODES if other.options is not None and isinstance(options, other.options)), None)
    if owner is None:
        raise InvalidRequestError(f"options={options!r}: no generation mode's options (domain/modes/)")
    fields = attrs.fields(type(options))
    name = next((f.name for f in fields if not _same(getattr(options, f.name), f.default)), fields[0].name)
    inputs = {} if request.inputs else {key: owner.input_field(key) for key in owner.selected_by}
    give = f", or give {' or '.join('{' + key + '}' for key in inputs)}" if inputs else ""  # its inputs' names
    raise InputRefusal(
        f"{name}={shown(getattr(options, name))}: a setting of the {owner.name} mode; this request runs in "
        f"{mode.name}{where}, which would not read it: leave it out{give}",
        **inputs,
    )


def _refuse_input(name: str, mode: GenerationMode) -> None:
    owner = next((field for other in MODES for field in other.inputs if field.name == name), None)
    if owner is None:
        raise InvalidRequestError(f"inputs=<{name!r}: ...>: {name!r} is no generation mode's input (domain/modes/)")
    raise InputRefusal(f"{mode.name} takes no {{given}}; give the inputs of one mode", given=owner)


def mode_for(request: GenerationRequest, model: ModelTraits) -> GenerationMode:
    """The mode `request` runs in on `model`, checked: InvalidRequestError, naming the fix, where the
    model cannot run it."""
    check_request(request)
    mode = resolved_mode(request, model)
    _check_options(request, mode, " on this model")
    mode.check_model(model)
    mode.check(request, model)
    return mode


def resolved_mode(request: GenerationRequest, model: ModelTraits) -> GenerationMode:
    """The mode `request` runs in on `model`, unchecked (what the memory plan counts)."""
    mode, default = requested_mode(request), default_mode(model)
    if mode is TEXT_TO_VIDEO or (not default.selected_by and default.takes(request.inputs)):
        return default  # a model's own mode takes what it reads (a Diffusion Forcing model's image or video)
    return mode


def default_mode(model: ModelTraits) -> GenerationMode:
    """The mode a request without inputs runs in on `model` (what the bench runs)."""
    return next((mode for mode in MODES if mode.default_on(model)), TEXT_TO_VIDEO)


def mode_options(inputs: Collection[str], values: Mapping[str, Any]) -> Any:
    """The options a request of `inputs` (names) holds, from `values` (every mode's options, by
    name: the config's, overridden by the request's): those of the mode the inputs select, else, for
    a request without inputs (its mode is the model's), of the one mode whose options `values` set
    off their defaults (`mode_for` refuses them on a model of another mode). A set option of a mode
    the request cannot run in is refused: nothing would read it."""
    selected = next((mode for mode in MODES if set(mode.selected_by) & set(inputs)), None)
    changed = {
        name: mode for mode in MODES for name, field in _option_fields(mode).items() if not _same(values[name], field.default)
    }  # fmt: skip
    owners = set(changed.values())
    if len(owners) == 1 and (owner := next(iter(owners))).takes(inputs) and not owner.selected_by:
        selected = owner  # options of a mode no input selects, which takes these inputs (Diffusion Forcing's)
    if selected is None and changed:
        selected = next(iter(changed.values()))
    for name, owner in changed.items():
        if owner is not selected:
            raise InvalidRequestError(
                f"{name}={shown(values[name])}: a setting of the {owner.name} mode; this request runs in "
                f"{selected.name}, which would not read it: leave it out"
            )
    if selected is None or selected.options is None:
        return None
    return selected.options(**{name: values[name] for name in _option_fields(selected)})


def _same(value: Any, default: Any) -> bool:
    """`value` is `default` (True is not 1: a bool given for a number is a setting, refused by its mode)."""
    return type(value) is type(default) and value == default


def _option_fields(mode: GenerationMode) -> dict[str, attrs.Attribute]:
    return {} if mode.options is None else {field.name: field for field in attrs.fields(mode.options)}


def mode_of_inputs(
    names: Collection[str], model: Callable[[], ModelTraits] | None, entrypoint: Entrypoint
) -> GenerationMode:
    """The mode that takes the inputs `names` (as `entrypoint` calls them: the CLI's flags, the HTTP
    API's file fields); where several do (`--video`: video-to-video or VACE), the model's default
    among them (`model` is asked only then), else of those an input given selects (a lone
    `pose_video`: Animate's, not S2V's, which its speech selects) the one of fewest inputs
    (`input_reference` over HTTP: image-to-video's, not Animate's, whose character comes with its
    videos)."""
    takers = [mode for mode in MODES if set(names) <= _called(mode, entrypoint) and mode.takes_count(len(set(names)))]
    if not takers:
        # the mode that takes most of them (the fewest inputs of its own first) names what to drop
        def count_taken(mode: GenerationMode) -> int:
            return min(len(set(names) & _called(mode, entrypoint)), mode.together or len(names))

        nearest = max(MODES, key=lambda mode: (count_taken(mode), -len(mode.inputs)))
        taken = " and ".join(name for name in names if name in _called(nearest, entrypoint))
        dropped = " and ".join(name for name in names if name not in _called(nearest, entrypoint))
        raise InvalidRequestError(
            f"no one generation mode takes {' with '.join(names)}: {nearest.name} takes {taken}; drop {dropped}, "
            "or give the inputs of one mode" + (" (`wanjax generate --help`)" if entrypoint is Entrypoint.CLI else "")
        )
    if len(takers) > 1:
        defaults = [] if model is None else [mode for mode in takers if mode.default_on(model())]
        selected = [mode for mode in takers if set(names) & _called(mode, entrypoint, mode.selected_by)]
        takers = defaults or sorted(selected or takers, key=lambda mode: len(mode.inputs))
    return takers[0]


def _called(mode: GenerationMode, entrypoint: Entrypoint, among: Collection[str] | None = None) -> set[str]:
    """What `entrypoint` calls `mode`'s inputs (those named in `among` only, where given)."""
    return {field.called(entrypoint) for field in mode.inputs
            if field.taken_by(entrypoint) and (among is None or field.name in among)}  # fmt: skip


def input_fields() -> tuple[InputField, ...]:
    """Every mode's input fields, one per CLI flag (the first mode's that names it)."""
    fields: dict[str, InputField] = {}
    for mode in MODES:
        for field in mode.inputs:
            fields.setdefault(field.flag, field)
    return tuple(fields.values())


def flag_help(flag: str) -> str:
    """The CLI help of `flag`: each mode's, joined, each text once (first-last-frame's `--image` is
    image-to-video's)."""
    return "; ".join(dict.fromkeys(field.help for mode in MODES for field in mode.inputs if field.flag == flag))


def http_fields() -> dict[str, InputField]:
    """The HTTP API's file fields -> the input each fills (the first mode's that takes it)."""
    fields: dict[str, InputField] = {}
    for mode in MODES:
        for field in mode.inputs:
            if field.http is not None:
                fields.setdefault(field.http, field)
    return fields


def input_names() -> set[str]:
    """Every mode's input names (the request's `inputs` keys)."""
    return {field.name for mode in MODES for field in mode.inputs}
