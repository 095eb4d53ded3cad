"""Memory sizes as people write them: `24GiB`, `80GB`, `512MiB`, or bytes."""

from __future__ import annotations

import re

from wanjax.domain.errors import ConfigError

UNITS = {
    "": 1, "b": 1, "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
}  # fmt: skip
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2, "float8_e4m3fn": 1}  # per element


def parse_size(text: str, *, what: str) -> int:
    """Bytes of `text` (a number and an optional unit, case-insensitive); a ConfigError naming `what`."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", text)
    unit = match and match.group(2).lower()
    if match is None or unit not in UNITS or float(match.group(1)) <= 0:
        raise ConfigError(f"{what} {text!r}: give a positive size such as 24GiB, 80GB or 512MiB")
    return int(float(match.group(1)) * UNITS[unit])
