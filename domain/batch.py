"""Batches: B videos in one denoising run, one row of the latents each.

The videos of a batch may differ only in what never changes a shape or the sampling plan
(prompt, negative prompt, seed), so one compiled step serves any batch of the same size.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import attrs
import numpy as np

from wanjax.domain.errors import InvalidRequestError
from wanjax.domain.requests import GenerationRequest

PER_VIDEO_FIELDS = ("prompt", "negative_prompt", "seed")


def shared_request(requests: Sequence[GenerationRequest]) -> GenerationRequest:
    """The request whose settings every video of the batch shares (the first); raises, naming the
    field, when another request differs in anything but `PER_VIDEO_FIELDS`."""
    if isinstance(requests, GenerationRequest) or len(requests) == 0:
        raise InvalidRequestError("a batch is a non-empty list of requests")
    for index, request in enumerate(requests):
        if not isinstance(request, GenerationRequest):
            raise InvalidRequestError(
                f"request {index} of the batch is {type(request).__name__}, not a GenerationRequest "
                "(make one with config.request(prompt, ...))"
            )
    first = requests[0]
    shared = [f.name for f in attrs.fields(GenerationRequest) if f.name not in PER_VIDEO_FIELDS]
    for index, request in enumerate(requests[1:], start=1):
        differing = [name for field in shared for name in _differing(field, getattr(request, field), getattr(first, field))]
        if differing:
            raise InvalidRequestError(
                f"request {index} of the batch differs from request 0 in {', '.join(differing)}; "
                f"the videos of one batch may differ only in {', '.join(PER_VIDEO_FIELDS)}"
            )
    return first


def _differing(field: str, a: object, b: object) -> list[str]:
    """The names in which request field `field` differs: its own, or for the mode's inputs and
    options, the input's or option's."""
    if _same(a, b):
        return []
    if field == "inputs":
        return [name for name in dict.fromkeys([*a, *b]) if not _same(a.get(name), b.get(name))]
    if field == "options" and type(a) is type(b):
        return [f.name for f in attrs.fields(type(a)) if not _same(getattr(a, f.name), getattr(b, f.name))]
    return [field]


def _same(a: object, b: object) -> bool:
    """Equal values; input pixels (arrays, a mode's `inputs`) by value, so a batch may share copies
    of one image."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and np.array_equal(a, b)
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(_same(a[key], b[key]) for key in a)
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b
