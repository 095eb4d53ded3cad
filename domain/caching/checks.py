"""Validators the policies' settings sections share: each failure names the key, the value and the fix."""

from __future__ import annotations

import math
from typing import Any

import attrs

from wanjax.domain.errors import InvalidRequestError

INF = math.inf


def fail(name: str, value: Any, fix: str) -> None:
    raise InvalidRequestError(f"{name}={value!r}: {fix}")


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def in_range(low: float, high: float, *, low_open: bool = False, high_open: bool = True):
    def check(_: Any, attribute: attrs.Attribute, value: float) -> None:
        above = value > low if low_open else value >= low
        below = value < high if high_open else value <= high
        if not (_is_number(value) and above and below):
            left, right = "(" if low_open else "[", ")" if high_open else "]"
            fail(attribute.name, value, f"must be a number in {left}{low}, {high}{right}")

    return check


def at_least(minimum: int):
    def check(_: Any, attribute: attrs.Attribute, value: int) -> None:
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            fail(attribute.name, value, f"must be an integer >= {minimum}")

    return check


def one_of(key: str, allowed: tuple[str, ...]):
    def check(_: Any, attribute: attrs.Attribute, value: str) -> None:
        if value not in allowed:
            fail(key, value, f"must be one of {', '.join(allowed)}")

    return check


def optional_numbers(*, positive: bool, even: bool = False):
    def check(_: Any, attribute: attrs.Attribute, value: tuple[float, ...] | None) -> None:
        if value is None:
            return
        if not value or not all(_is_number(v) and (v > 0 or not positive) for v in value):
            kind = "positive numbers" if positive else "numbers"
            fail(attribute.name, value, f"must be a non-empty list of finite {kind}, or unset")
        if even and len(value) % 2:
            fail(attribute.name, f"<{len(value)} values>", "must interleave cond and uncond ratios (an even count)")

    return check


def optional_split(_: Any, attribute: attrs.Attribute, value: int | None) -> None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
        fail(attribute.name, value, "must be a step index >= 1 (the curve's first low-noise step), or unset")
