"""A video request as a client sends it -> a validated GenerationRequest, or an error naming the
field, before anything is queued; and the validated request as a job keeps it (its record), back.

The client's fields are the video API's (`prompt`, `model`, `seconds`, `size`, the first frame
as `input_reference`) and, as extensions, GenerationRequest's own; `num_frames`, `width` and
`height` win over `seconds` and `size`.

Media are read as the mode that takes them reads them (Animate's `input_reference` is its
character, image-to-video's its first frame). They are checked from their headers (format, size,
frame count) and kept as the client's bytes: a validated request holds stand-ins in their place,
views of one black pixel in the shape decoding will give, so that every check sees the sizes and
lengths it checks; the job's media are decoded when it runs (`request_from_record`), so a queued
job costs its files on disk, not their pixels."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Collection, Mapping
from typing import Any

import attrs

from wanjax.adapters.media.mode_inputs import decode_input, input_shape, stand_in
from wanjax.application.lora_folder import LoraFolder, lora_fields
from wanjax.application.preflight import REQUEST_LORA_FIELDS
from wanjax.application.service import GenerationService
from wanjax.domain.config import GenerationConfig
from wanjax.domain.errors import InvalidRequestError
from wanjax.domain.modes.base import GenerationMode, InputKind
from wanjax.domain.modes.registry import MODES, http_fields, mode_of_inputs, requested_mode
from wanjax.domain.numbers import parse_decimal, parse_whole, shown
from wanjax.domain.requests import GenerationRequest

MEDIA_FIELDS = {client: field.name for client, field in http_fields().items()}
"""The client's file fields -> the modes' inputs they fill (png/jpg images, mp4 videos)."""
CLI_ONLY_MODES = [mode for mode in MODES if mode.inputs and not any(field.http for field in mode.inputs)]
REFUSED_FIELDS = {
    "cache": "set by the server (--set cache_policy=...), not per request",
    **{name: f"{mode.name} inputs are taken by `wanjax generate` only" for mode in CLI_ONLY_MODES
       for name in mode.selected_by},
    **{name: f"send it as the file `{client}`" for client, name in MEDIA_FIELDS.items() if client != name},
}  # fmt: skip
CLI_FLAGS = {field.flag: client for client, field in http_fields().items()}
"""The CLI's flags that the domain's messages name, and the fields a client gives instead."""
CLI_ONLY_FIELDS = tuple(name for mode in CLI_ONLY_MODES for name in mode.selected_by)
NOT_RECORDED = ("prompt", *MEDIA_FIELDS.values(), "inputs", *CLI_ONLY_FIELDS, "cache")
"""Request fields a job's record holds elsewhere (the prompt first, media as files) or not at all."""
RECORD_ONLY = ("media", "media_shapes", "output_frames", "segments")
"""What a job's record holds besides request fields: its media files' names and shapes, and the
frames of the video it makes (Animate's: its pose video's) and the segments it makes them in."""
MEDIA_PIXEL_MULTIPLE = 36
"""An image or video frame may hold at most this many times the video's pixels (6 times its width
and height: a 4032x3024 photo for an 832x480 video), checked before it is decoded."""


def frames_for_seconds(seconds: float, fps: int) -> int:
    """The 4k+1 frame count nearest to `seconds` at `fps` (5 s at 16 fps: 81 frames)."""
    return 4 * max(0, round((seconds * fps - 1) / 4)) + 1


def validated_request(
    fields: Mapping[str, Any], media: Mapping[str, bytes], config: GenerationConfig, service: GenerationService,
    *, model: str, check_memory: Callable[[GenerationRequest], object] = lambda request: None,
    loras: LoraFolder | None = None,
) -> GenerationRequest:  # fmt: skip
    """`fields` (the client's, JSON values) and `media` (file bytes by client field) over `config`'s
    defaults, for the served `model`, its media as stand-ins (the module's docstring), LoRAs named
    by their files in `loras`. Raises InvalidRequestError or ConfigError (unknown fields), each
    naming the client's field, for whatever `service.generate` or `check_memory` (the memory plan)
    would refuse, and for media the model takes no part of, before any is decoded."""
    fields = dict(fields)
    prompt = fields.pop("prompt", None)
    if not isinstance(prompt, str):
        raise InvalidRequestError(f"prompt={prompt!r}: give the prompt as a string")
    asked = fields.pop("model", None)
    if asked is not None and asked != model:
        raise InvalidRequestError(f"model={asked!r}: this server serves {model!r}; give model={model!r} or leave it out")
    refused = sorted(set(fields) & set(REFUSED_FIELDS))
    if refused:
        raise InvalidRequestError(f"{refused[0]}: {REFUSED_FIELDS[refused[0]]}")
    given = {name: value for name in ("size", "seconds") if (value := fields.pop(name, None)) is not None}
    derived = {**_size_fields(given.get("size")), **_seconds_fields(given.get("seconds"), config.sampling.fps)}
    used = {name: value for name, value in derived.items() if name not in fields}
    fields.update(used)
    lora_fields(loras, fields, REQUEST_LORA_FIELDS)
    try:
        files = {MEDIA_FIELDS[client]: data for client, data in media.items()}
        mode = media_mode(files)
        mode.check_model(service.traits)  # before the files are read: a model without the mode takes none
        shapes = media_shapes(files, mode, fields.get("num_frames", config.sampling.num_frames))
        size = {name: _stand_in_side(fields.get(name, getattr(config.sampling, name))) for name in ("height", "width")}
        request = config.request(prompt, **fields, **mode.from_media(stand_in_media(shapes, mode, **size)))
        service.check([request])
        check_memory(request)
        check_pixels(shapes, request)
    except InvalidRequestError as err:
        message = _named_by_client(str(err), given, used)
        raise InvalidRequestError(message if loras is None else loras.in_clients_terms(message)) from None
    return request


def request_record(request: GenerationRequest) -> dict[str, Any]:
    """The request's fields as JSON values, every default resolved, under `media` the names of its
    media fields (whose files the job keeps), under `media_shapes` each one's (frames, height,
    width) as read, and the frames of its video (`output_frames`): with those files, the same
    request on any server (`request_from_record`), whatever that server's defaults."""
    values = attrs.asdict(request, recurse=False)
    record = {name: value for name, value in values.items() if name not in NOT_RECORDED}
    if request.sample_timesteps is not None:
        record["sample_timesteps"] = list(request.sample_timesteps)
    record.update({name: [attrs.asdict(spec) for spec in getattr(request, name)] for name in REQUEST_LORA_FIELDS})
    media = [name for name in MEDIA_FIELDS.values() if request.input(name) is not None]
    kinds = {field.name: field.kind for field in media_mode(media).inputs}
    shapes = {name: _shape(kinds[name], request.input(name)) for name in media}
    mode = requested_mode(request)
    return {"prompt": request.prompt, **record, "media": media, "media_shapes": shapes,
            "output_frames": mode.output_frames(request), "segments": mode.segment_count(request)}  # fmt: skip


def _shape(kind: InputKind, pixels: Any) -> list[int]:
    """(frames, height, width) of an input's pixels (an image: one frame; canvas images: the first's)."""
    pixels = pixels[0] if kind is InputKind.CANVAS_IMAGES else pixels
    return list(pixels.shape[:3]) if kind.is_video else [1, *pixels.shape[:2]]


def request_from_record(record: Mapping[str, Any], media: Mapping[str, bytes], config: GenerationConfig) -> GenerationRequest:
    """The request `request_record` recorded, with its media (file bytes by request field) decoded."""
    fields = {name: value for name, value in record.items() if name not in RECORD_ONLY}
    mode = media_mode(record["media"])
    decoded = decoded_media(media, mode, fields["num_frames"], fields["height"], fields["width"])
    return config.request(fields.pop("prompt"), **fields, **mode.from_media(decoded))


def queued_request(record: Mapping[str, Any], config: GenerationConfig) -> GenerationRequest:
    """The request `request_record` recorded, its media as stand-ins (what a queue holds)."""
    fields = {name: value for name, value in record.items() if name not in RECORD_ONLY}
    # a record written before `media_shapes` holds an image or a first-frames video: any size will do
    shapes = record.get("media_shapes") or {name: (fields["num_frames"], 1, 1) for name in record["media"]}
    mode = media_mode(record["media"])
    stand_ins = stand_in_media(shapes, mode, height=fields["height"], width=fields["width"])
    return config.request(fields.pop("prompt"), **fields, **mode.from_media(stand_ins))


def media_mode(names: Collection[str]) -> GenerationMode:
    """The mode whose HTTP file fields take the inputs `names` (request fields): the one that reads
    them (InvalidRequestError, naming the inputs to drop, where no one mode takes them all)."""
    return mode_of_inputs(list(names), None, over_http=True)


def media_shapes(files: Mapping[str, bytes], mode: GenerationMode, num_frames: Any) -> dict[str, tuple[int, int, int]]:
    """(frames, height, width) of each client file (by request field) as `mode` reads it: a video its
    first `num_frames` frames (at least that many), or its every frame for a whole-video input; an
    image one frame. Read from headers and packets, nothing decoded."""
    kinds = {field.name: field.kind for field in mode.inputs}
    shapes = {}
    for name, data in files.items():
        if kinds[name].is_video and not kinds[name].is_whole:
            _check_frame_count(num_frames)
        shapes[name] = input_shape(kinds[name], data, num_frames, f"{_client_name(name)} (the request's file)")
    return shapes


def stand_in_media(
    shapes: Mapping[str, tuple[int, int, int]], mode: GenerationMode, *, height: int, width: int
) -> dict[str, Any]:
    """Inputs as stand-ins (`mode_inputs.stand_in`), each in the shape `mode` reads its file of
    (frames, height, width) `shapes` in for a height x width video: what the checks see of media
    not yet decoded (a pose video's length, a face video's size)."""
    return {field.name: stand_in(field.kind, shapes[field.name], height, width) for field in mode.inputs
            if field.name in shapes}  # fmt: skip


def check_pixels(shapes: Mapping[str, tuple[int, int, int]], request: GenerationRequest) -> None:
    """Each client file's image or frames (`shapes`: by request field, as read) of at most
    MEDIA_PIXEL_MULTIPLE times the video's pixels."""
    limit = MEDIA_PIXEL_MULTIPLE * request.height * request.width
    for name, (_, height, width) in shapes.items():
        if width * height > limit:
            raise InvalidRequestError(
                f"{_client_name(name)} (the request's file) is {width}x{height}: for a {request.width}x"
                f"{request.height} video, its pixels may be at most {MEDIA_PIXEL_MULTIPLE} times the video's "
                f"({limit}); scale it down, e.g. to {request.width}x{request.height}"
            )


def decoded_media(
    media: Mapping[str, bytes], mode: GenerationMode, num_frames: Any, height: int, width: int
) -> dict[str, Any]:
    """Inputs from their files' bytes (by request field), each as `mode` reads it for a height x width
    video of `num_frames` frames (a video's first `num_frames`, or every frame for a whole-video input)."""
    kinds = {field.name: field.kind for field in mode.inputs}
    decoded: dict[str, Any] = {}
    for name, data in media.items():
        what = f"{_client_name(name)} (the request's file)"
        if kinds[name].is_video and not kinds[name].is_whole:
            _check_frame_count(num_frames)
        decoded[name] = decode_input(kinds[name], data, what, num_frames=num_frames, height=height, width=width)
    return decoded


def _stand_in_side(value: Any) -> int:
    """A side of the stand-ins fitted to the video: the request's, or 1 where it is no positive
    integer (the request then refuses it, naming it)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 1


def _check_frame_count(num_frames: Any) -> None:
    if not isinstance(num_frames, int) or isinstance(num_frames, bool) or num_frames < 1:
        raise InvalidRequestError(f"num_frames={num_frames!r}: must be a positive integer of the form 4k+1")


def _size_fields(size: Any) -> dict[str, int]:
    """`size` ("WxH", in digits 0-9) as width and height."""
    if size is None:
        return {}
    width, _, height = str(size).partition("x")
    try:
        if not isinstance(size, str):
            raise ValueError
        return {"width": parse_whole(width), "height": parse_whole(height)}
    except ValueError:
        raise InvalidRequestError(f"size={shown(size)}: give WIDTHxHEIGHT in pixels, e.g. '832x480'") from None


def _seconds_fields(seconds: Any, fps: int) -> dict[str, int]:
    """`seconds` (a number, or its text in digits 0-9) as num_frames at `fps`."""
    if seconds is None:
        return {}
    try:
        value = parse_decimal(seconds) if isinstance(seconds, str) else float(seconds)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an int past a float's range
        value = math.nan
    if isinstance(seconds, bool) or not 0 < value * fps < math.inf:
        raise InvalidRequestError(f"seconds={shown(seconds)}: give the duration as a number of seconds > 0, e.g. '5'")
    return {"num_frames": frames_for_seconds(value, fps)}


def _named_by_client(message: str, given: Mapping[str, Any], used: Mapping[str, Any]) -> str:
    """An error in the client's terms: a field it gave as `size` or `seconds` named so, and the
    CLI's flags in the domain's fixes (`--image PATH`) named as the fields it sends instead."""
    message = re.sub(_CLI_FLAG_PATTERN, lambda flag: CLI_FLAGS[flag[1]], message)
    for client, fields in (("size", ("width", "height")), ("seconds", ("num_frames",))):
        if message.startswith(tuple(f"{name}=" for name in fields if name in used)):
            return f"{client}={shown(given[client])} gives {message}"
    return message


_CLI_FLAG_PATTERN = rf"({'|'.join(re.escape(flag) for flag in CLI_FLAGS)})( PATH)?\b"


def _client_name(field: str) -> str:
    return next(client for client, name in MEDIA_FIELDS.items() if name == field)
