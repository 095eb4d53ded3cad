"""Which step caches may run together. Today none may: a request turns on at most one (the
denoiser's device features each assume they own the step)."""

from __future__ import annotations

from collections.abc import Sequence

from wanjax.domain.errors import InvalidRequestError

ALLOWED_COMBINATIONS: frozenset[frozenset[str]] = frozenset()
"""Sets of two or more policy names that may be on together (none yet)."""


def check_combination(names: Sequence[str]) -> None:
    """Refuses two or more policies on at once unless ALLOWED_COMBINATIONS holds their set."""
    if len(names) > 1 and frozenset(names) not in ALLOWED_COMBINATIONS:
        raise InvalidRequestError(
            f"{' and '.join(names)} cannot run together: the denoiser runs one step cache at a time; "
            "keep one (magcache_calibration runs dense, with cache_policy=none)"
        )
