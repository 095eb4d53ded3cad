"""A request as a client sends it (a JSON object) -> a validated GenerationRequest, or an error
naming the field, before anything is queued."""

from __future__ import annotations

import base64
import binascii
from typing import Any

from wanjax.adapters.media.images import decode_image
from wanjax.application.service import GenerationService
from wanjax.domain.config import GenerationConfig
from wanjax.domain.errors import InvalidRequestError
from wanjax.domain.requests import GenerationRequest

SERVER_FIELDS = ("cache",)
"""Request fields a client cannot set: the cache policy is the server's (`--set cache_policy=...`)."""


def request_from_json(body: Any, config: GenerationConfig, service: GenerationService) -> GenerationRequest:
    """`body`'s fields over `config`'s defaults; `image` is a png/jpg as base64. Raises
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
    if fields.get("image") is not None:
        fields["image"] = _image(fields["image"])
    request = config.request(prompt, **fields)
    service.check([request])
    return request


def _image(encoded: Any) -> Any:
    if not isinstance(encoded, str):
        raise InvalidRequestError("image: give the first frame as a base64 string of a png/jpg file")
    try:
        data = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidRequestError("image: not valid base64; encode the png/jpg file's bytes as base64") from None
    return decode_image(data, "image (the request's base64 field)")
