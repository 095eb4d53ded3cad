"""A request as a client sends it (a JSON object) -> a validated GenerationRequest, or an error
naming the field, before anything is queued."""

from __future__ import annotations

import base64
import binascii
from typing import Any

from wanjax.adapters.media.images import decode_image
from wanjax.adapters.media.video_input import decode_video
from wanjax.application.service import GenerationService
from wanjax.domain.config import GenerationConfig
from wanjax.domain.errors import InvalidRequestError
from wanjax.domain.requests import GenerationRequest

SERVER_FIELDS = ("cache",)
"""Request fields a client cannot set: the cache policy is the server's (`--set cache_policy=...`)."""


def request_from_json(body: Any, config: GenerationConfig, service: GenerationService) -> GenerationRequest:
    """`body`'s fields over `config`'s defaults; `image` and `last_image` are png/jpg files and
    `video` an mp4 file, each as base64. Raises
    InvalidRequestError or ConfigError (unknown fields), each naming the field, for whatever
    `service.generate` would refuse before its first step."""
    if not isinstance(body, dict):
        raise InvalidRequestError(f"the request must be a JSON object of request fields, got {type(body).__name__}")
    fields = dict(body)
    prompt = fields.pop("prompt", None)
    if not isinstance(prompt, str):
        raise InvalidRequestError(f"prompt={prompt!r}: give the prompt as a string")
    for name in SERVER_FIELDS:
        if name in fields:
            raise InvalidRequestError(f"{name}: set by the server (--set cache_policy=...), not per request")
    for name in ("image", "last_image"):
        if fields.get(name) is not None:
            fields[name] = decode_image(_decoded(fields[name], name, "a png/jpg file"), f"{name} (the request's base64 field)")
    if fields.get("video") is not None:
        num_frames = fields.get("num_frames", config.sampling.num_frames)
        if not isinstance(num_frames, int) or isinstance(num_frames, bool) or num_frames < 1:
            raise InvalidRequestError(f"num_frames={num_frames!r}: must be a positive integer of the form 4k+1")
        data = _decoded(fields["video"], "video", "an mp4 file")
        fields["video"] = decode_video(data, num_frames, "video (the request's base64 field)")
    request = config.request(prompt, **fields)
    service.check([request])
    return request


def _decoded(encoded: Any, name: str, kind: str) -> bytes:
    """The bytes of the base64 request field `name`, a file of `kind`."""
    if not isinstance(encoded, str):
        raise InvalidRequestError(f"{name}: give it as a base64 string of {kind}")
    try:
        return base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidRequestError(f"{name}: not valid base64; encode the bytes of {kind} as base64") from None
