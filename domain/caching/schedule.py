"""Step arithmetic every cache planner shares: expert segments, fractions of a step count,
and nearest-neighbour interpolation of a per-step curve."""

from __future__ import annotations

import numpy as np

_ROUNDING_SLACK = 1e-9  # int(S * r) for a decimal r such as 0.9 or 1/3 written as 0.3334


def expert_segments(experts: np.ndarray) -> list[tuple[int, int]]:
    """[start, end) of each run of equal expert indices in `experts` [S], in step order."""
    changes = np.flatnonzero(np.diff(experts)) + 1
    bounds = [0, *changes.tolist(), len(experts)]
    return [(start, end) for start, end in zip(bounds[:-1], bounds[1:]) if end > start]


def first_steps(experts: np.ndarray) -> np.ndarray:
    """[S] bool: the first step of each expert segment (where a cached result from the other
    expert must not be reused)."""
    first = np.zeros(len(experts), dtype=bool)
    first[[start for start, _ in expert_segments(experts)]] = True
    return first


def step_fraction(num_steps: int, ratio: float) -> int:
    """int(num_steps * ratio), as the reference implementations write it, immune to 0.9 * 10 = 8.999..."""
    return int(num_steps * ratio + _ROUNDING_SLACK)


def nearest_interp(values: np.ndarray, length: int) -> np.ndarray:
    """`values` [n] resampled to `length` by nearest neighbour: entry i takes
    values[round(i * (n - 1) / (length - 1))]; one step takes the last value.

    The product is formed in float32 and rounded half to even, exactly as diffusers' MagCache
    hook does; the authors' float64 numpy mapping picks the other neighbour at a few exact
    halves (e.g. 50 -> 43 steps)."""
    values = np.asarray(values)
    if length == 1:
        return values[-1:]
    scale = np.float32((len(values) - 1) / (length - 1))
    return values[np.round(np.arange(length, dtype=np.float32) * scale).astype(int)]
