"""Memory sizes as people write them: `24GiB`, `80GB`, `512MiB`, or bytes."""

from __future__ import annotations

import re
from fractions import Fraction

from wanjax.domain.errors import ConfigError
from wanjax.domain.numbers import MAX_NUMBER_CHARACTERS, shown

UNITS = {
    "": 1, "b": 1, "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
}  # fmt: skip
MAX_SIZE_BYTES = 2**60
"""The largest size read (1 EiB): past every machine's memory, small enough for exact arithmetic."""
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2, "float8_e4m3fn": 1}  # per element
_SIZE = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*")


def parse_size(text: str, *, what: str) -> int:
    """Bytes of `text` (a number in digits 0-9 and an optional unit, case-insensitive), from one
    byte to MAX_SIZE_BYTES; a ConfigError naming `what`."""
    match = _SIZE.fullmatch(text) if len(text) <= MAX_NUMBER_CHARACTERS else None
    unit = match and match.group(2).lower()
    if match is None or unit not in UNITS:
        raise ConfigError(f"{what} {shown(text)}: give a positive size such as 24GiB, 80GB or 512MiB")
    size = int(Fraction(match.group(1)) * UNITS[unit])  # exact: no float rounding, no overflow
    if not 1 <= size <= MAX_SIZE_BYTES:
        raise ConfigError(f"{what} {shown(text)}: give a size from 1 byte to 1 EiB, such as 24GiB, 80GB or 512MiB")
    return size
