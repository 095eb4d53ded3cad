"""Numbers as people and clients write them, read one way everywhere (CLI flags, `--set`, sizes,
HTTP fields): plain ASCII decimal text of a bounded length, finite.

Python's own `int()` and `float()` take more: digits of every script (`int("١٢")` is 12), `1_000`,
`inf`, `nan`, and text of thousands of digits (which `int()` refuses past 4300 with a ValueError
of its own and `float()` turns into inf). None of that is a number a user means here."""

from __future__ import annotations

import math
import re
from typing import Any

MAX_NUMBER_CHARACTERS = 64
"""The longest number text read: far past any value a setting takes (a float's repr is at most 24)."""
SHOWN_CHARACTERS = 60
"""How much of a refused value a message repeats."""

_WHOLE = re.compile(r"[+-]?[0-9]+")
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def parse_whole(text: str) -> int:
    """The integer `text` writes in ASCII digits (an optional sign, surrounding spaces allowed);
    ValueError saying what it is not."""
    stripped = _bounded(text).strip()
    if not _WHOLE.fullmatch(stripped):
        raise ValueError(f"{shown(text)} is not a whole number in digits 0-9")
    return int(stripped)


def parse_decimal(text: str) -> float:
    """The finite number `text` writes in ASCII digits (`0.8`, `-2`, `1e-3`); ValueError saying what
    it is not (inf and nan included)."""
    stripped = _bounded(text).strip()
    if not _DECIMAL.fullmatch(stripped):
        raise ValueError(f"{shown(text)} is not a finite number in digits 0-9 (e.g. 0.8)")
    value = float(stripped)
    if not math.isfinite(value):
        raise ValueError(f"{shown(text)} is past the largest number (about 1.8e308)")
    return value


def is_finite_number(value: Any) -> bool:
    """An int or float (not a bool) that is finite; an int of any size is (no float conversion)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return isinstance(value, int) or math.isfinite(value)


def json_integer(text: str) -> int | float:
    """A JSON integer literal as a number: an int up to MAX_NUMBER_CHARACTERS digits, past that the
    float it rounds to (inf from 309 digits), which every numeric field refuses by its own range,
    naming itself (Python's JSON reader would refuse the whole body past 4300 digits)."""
    return int(text) if len(text) <= MAX_NUMBER_CHARACTERS else float(text)


def shown(value: Any) -> str:
    """`repr(value)` cut to SHOWN_CHARACTERS, saying how long it was: what a message repeats of a
    refused value (a client's 19 MB list or a 5000-digit number is not sent back whole)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 4 * SHOWN_CHARACTERS:
        return f"<an integer of about {int(value.bit_length() * math.log10(2)) + 1} digits>"
    text = repr(value)
    if len(text) <= SHOWN_CHARACTERS:
        return text
    return f"{text[: SHOWN_CHARACTERS - 10]}...<{len(text)} characters>"


def _bounded(text: str) -> str:
    if not isinstance(text, str):
        raise ValueError(f"{shown(text)} is not a number")
    if len(text) > MAX_NUMBER_CHARACTERS:
        raise ValueError(f"a number of {len(text)} characters: at most {MAX_NUMBER_CHARACTERS}")
    return text
