"""A video request as a client sends it -> a validated GenerationRequest, or an error naming the
field, before anything is queued; and the validated request as a job keeps it (its record), back.

The client's fields are the video API's (`prompt`, `model`, `seconds`, `size`, the first frame
as `input_reference`) and, as extensions, GenerationRequest's own; `num_frames`, `width` and
`height` win over `seconds` and `size`.

Media are read as the mode that takes them reads them (Animate's `input_reference` is its
character, image-to-video's its first frame), each through its kind's registered reader
(adapters/media/readers.py). They are probed and checked from their headers (format, size,
frame count, length) and kept as the client's bytes: a validated request holds stand-ins in their place,
views of one black pixel in the shape decoding will give, so that every check sees the sizes and
lengths it checks; the job's media are decoded when it runs (`request_from_record`), so a queued
job costs its files on disk, not their pixels. Refusals name inputs by their HTTP fields
(domain/inputs/fields.InputRefusal)."""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping
from typing import Any

import attrs

from wanjax.adapters.media.readers import probe_input, read_input, stand_in
from wanjax.application.lora_folder import LoraFolder, lora_fields
from wanjax.application.preflight import REQUEST_LORA_FIELDS
from wanjax.application.service import GenerationService
from wanjax.domain.caching.settings import CacheSettings
from wanjax.domain.config import GenerationConfig, cache_values, is_cache_key
from wanjax.domain.errors import ConfigError, InvalidRequestError
from wanjax.domain.inputs.fields import Entrypoint, named_for
from wanjax.domain.inputs.kinds import PixelKind
from wanjax.domain.inputs.reader import VideoSize
from wanjax.domain.modes.base import GenerationMode
from wanjax.domain.modes.registry import MODES, http_fields, mode_of_inputs, requested_mode
from wanjax.domain.numbers import parse_decimal, parse_whole, shown
from wanjax.domain.requests import GenerationRequest

MEDIA_FIELDS = {client: field.name for client, field in http_fields().items()}
"""The client's file fields -> the modes' inputs they fill (png/jpg images, mp4 videos)."""
REFUSED_FIELDS = {
    "cache": "give the step cache's keys as fields of their own, e.g. cache_policy=dbcache and Fn_compute_blocks=4 "
             "(docs/caching.md)",
    "magcache_calibration": "a calibration run's curve is written by `wanjax generate --set magcache_calibration=true` "
                            "only; a server returns videos",
    "inputs": "send each input as its file",
    "options": "send each option as its own field (e.g. strength)",
    **{field.name: f"{mode.name} inputs are taken by `wanjax generate` only" for mode in MODES
       for field in mode.inputs if field.name not in MEDIA_FIELDS.values()},
    **{name: f"send it as the file `{client}`" for client, name in MEDIA_FIELDS.items()},
}  # fmt: skip
NOT_RECORDED = ("prompt", "inputs", "options", "cache")
"""Request fields a job's record holds elsewhere (the prompt first, media as files, options and
the step cache by their keys) or not at all."""
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
        mode = media_mode(files, fields)
        mode.check_model(service.traits)  # before the files are read: a model without the mode takes none
        size = VideoSize(
            fields.get("num_frames", config.sampling.num_frames),
            *(_stand_in_side(fields.get(name, getattr(config.sampling, name))) for name in ("height", "width")),
        )
        shapes = media_shapes(files, mode, size)
        cache = _client_cache(fields, config)
        request = config.request(prompt, **fields, cache=cache, **stand_in_media(shapes, mode, size))
        service.check([request])
        check_memory(request)
        check_pixels(shapes, mode, request)
    except InvalidRequestError as err:
        message = _named_by_client(named_for(err, Entrypoint.HTTP), given, used)
        raise InvalidRequestError(message if loras is None else loras.in_clients_terms(message)) from None
    return request


def request_record(request: GenerationRequest) -> dict[str, Any]:
    """The request's fields as JSON values, every default resolved, under `media` the names of its
    media fields (whose files the job keeps), under `media_shapes` each one's (frames, height,
    width) as read, and the frames of its video (`output_frames`): with those files, the same
    request on any server (`request_from_record`), whatever that server's defaults."""
    values = attrs.asdict(request, recurse=False)
    record = {name: value for name, value in values.items() if name not in NOT_RECORDED}
    record.update(cache_values(request.cache))
    if request.options is not None:
        record.update(attrs.asdict(request.options))
    if request.sample_timesteps is not None:
        record["sample_timesteps"] = list(request.sample_timesteps)
    record.update({name: [attrs.asdict(spec) for spec in getattr(request, name)] for name in REQUEST_LORA_FIELDS})
    mode = requested_mode(request)
    media = list(request.inputs)
    shapes = {field.name: list(field.kind.probe_of(request.input(field.name))) for field in mode.inputs
              if field.name in request.inputs}  # fmt: skip
    frames = mode.output_frames(request)
    return {"prompt": request.prompt, **record, "media": media, "media_shapes": shapes, "output_frames": frames,
            "segments": mode.segment_count(request)}  # fmt: skip


def request_from_record(record: Mapping[str, Any], media: Mapping[str, bytes], config: GenerationConfig) -> GenerationRequest:
    """The request `request_record` recorded, with its media (file bytes by request field) decoded."""
    fields = {name: value for name, value in record.items() if name not in RECORD_ONLY}
    mode = media_mode(record["media"], record)
    decoded = decoded_media(media, mode, VideoSize(fields["num_frames"], fields["height"], fields["width"]))
    cache = _recorded_cache(fields, config)
    return config.request(fields.pop("prompt"), **fields, cache=cache, **decoded)


def queued_request(record: Mapping[str, Any], config: GenerationConfig) -> GenerationRequest:
    """The request `request_record` recorded, its media as stand-ins (what a queue holds)."""
    fields = {name: value for name, value in record.items() if name not in RECORD_ONLY}
    # a record written before `media_shapes` holds an image or a first-frames video: any size will do
    shapes = record.get("media_shapes") or {name: (fields["num_frames"], 1, 1) for name in record["media"]}
    mode = media_mode(record["media"], record)
    size = VideoSize(fields["num_frames"], fields["height"], fields["width"])
    cache = _recorded_cache(fields, config)
    return config.request(fields.pop("prompt"), **fields, cache=cache, **stand_in_media(shapes, mode, size))


def _client_cache(fields: dict[str, Any], config: GenerationConfig) -> CacheSettings:
    """Takes a client's step cache keys out of `fields`: `config`'s cache with them over it, each
    parsed and checked as `--set` gives it (an InvalidRequestError names the key)."""
    return _with_cache(config, _cache_keys(fields))


def _recorded_cache(fields: dict[str, Any], config: GenerationConfig) -> CacheSettings:
    """Takes a record's step cache keys out of `fields` (`cache_values`: over the generic defaults,
    whatever the server's); a record of before requests chose their cache: the server's."""
    given = _cache_keys(fields)
    return _with_cache(GenerationConfig(), given) if "cache_policy" in given else config.cache


def _cache_keys(fields: dict[str, Any]) -> dict[str, Any]:
    return {name: fields.pop(name) for name in [name for name in fields if is_cache_key(name)]}


def _with_cache(config: GenerationConfig, given: dict[str, Any]) -> CacheSettings:
    try:
        return config.with_cache(given, source="request") if given else config.cache
    except ConfigError as err:
        raise InvalidRequestError(str(err)) from None


def media_mode(files: Collection[str], fields: Collection[str] = ()) -> GenerationMode:
    """The mode whose HTTP file fields take the inputs `files` (by request field): the one that reads
    them (InvalidRequestError, naming the fields to drop, where no one mode takes them all). Where
    `fields` (the client's, or a record's) name options of a mode that no input selects and that
    takes these inputs (Diffusion Forcing extending a video), that mode reads them."""
    for mode in MODES:
        options = set() if mode.options is None else {field.name for field in attrs.fields(mode.options)}
        if not mode.selected_by and options & set(fields) and mode.takes(files):
            return mode
    return mode_of_inputs([_client_name(name) for name in files], None, Entrypoint.HTTP)


def media_shapes(files: Mapping[str, bytes], mode: GenerationMode, size: VideoSize) -> dict[str, tuple[float, ...]]:
    """Each client file's probe (by request field) as `mode` reads it, checked (a video's frames and
    size, a sound's length): read from headers and packets, nothing decoded."""
    fields = {field.name: field for field in mode.inputs}
    return {name: probe_input(fields[name].kind, data, _named(name), size) for name, data in files.items()}


def stand_in_media(shapes: Mapping[str, Any], mode: GenerationMode, size: VideoSize) -> dict[str, Any]:
    """Inputs as stand-ins (`readers.stand_in`), each as `mode` reads its file of probe `shapes`
    for a video of `size`: what the checks see of media not yet decoded (a pose video's length, a
    face video's size)."""
    return {field.name: stand_in(field.kind, shapes[field.name], size) for field in mode.inputs
            if field.name in shapes}  # fmt: skip


def check_pixels(shapes: Mapping[str, Any], mode: GenerationMode, request: GenerationRequest) -> None:
    """Each client image or video (`shapes`: probes by request field) of at most
    MEDIA_PIXEL_MULTIPLE times the video's pixels."""
    limit = MEDIA_PIXEL_MULTIPLE * request.height * request.width
    pixel_inputs = {field.name for field in mode.inputs if isinstance(field.kind, PixelKind)}
    for name, (_, height, width) in ((name, shape) for name, shape in shapes.items() if name in pixel_inputs):
        if width * height > limit:
            raise InvalidRequestError(
                f"{_client_name(name)} (the request's file) is {width}x{height}: for a {request.width}x"
                f"{request.height} video, its pixels may be at most {MEDIA_PIXEL_MULTIPLE} times the video's "
                f"({limit}); scale it down, e.g. to {request.width}x{request.height}"
            )


def decoded_media(media: Mapping[str, bytes], mode: GenerationMode, size: VideoSize) -> dict[str, Any]:
    """Inputs from their files' bytes (by request field), each as `mode` reads it for a video of `size`."""
    fields = {field.name: field for field in mode.inputs}
    return {name: read_input(fields[name].kind, data, _named(name), size) for name, data in media.items()}


def _stand_in_side(value: Any) -> int:
    """A side of the stand-ins fitted to the video: the request's, or 1 where it is no positive
    integer (the request then refuses it, naming it)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 1


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
    """An error in the client's terms: a field it gave as `size` or `seconds` named so."""
    for client, fields in (("size", ("width", "height")), ("seconds", ("num_frames",))):
        if message.startswith(tuple(f"{name}=" for name in fields if name in used)):
            return f"{client}={shown(given[client])} gives {message}"
    return message


def _client_name(field: str) -> str:
    return next(client for client, name in MEDIA_FIELDS.items() if name == field)


def _named(field: str) -> str:
    """What a refusal about the file of request field `field` calls it."""
    return f"{_client_name(field)} (the request's file)"
