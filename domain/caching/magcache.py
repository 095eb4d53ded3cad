"""MagCache (arXiv 2506.09045): which steps reuse the cached block residual, decided on the host
from a calibrated magnitude-ratio curve (docs/caching.md, "MagCache")."""

from __future__ import annotations

import attrs
import numpy as np

from wanjax.domain.caching.plan import CachePlan
from wanjax.domain.caching.schedule import expert_segments, nearest_interp
from wanjax.domain.caching.settings import CacheSettings
from wanjax.domain.errors import InvalidRequestError


def ratios_for_steps(mag_ratios: tuple[float, ...], split: int | None, experts: np.ndarray) -> np.ndarray:
    """The curve `mag_ratios` (cond, uncond interleaved) on the run's steps: [S, 2] (cond, uncond).

    Without `split` the whole curve is interpolated to S steps. With `split` (the curve's first
    low-noise step), its high-noise and low-noise segments are interpolated onto the run's own
    expert segments, so the curve's expert boundary lands on the run's.
    """
    curve = np.asarray(mag_ratios, dtype=np.float64).reshape(-1, 2)  # [n, 2]
    segments = expert_segments(experts)
    if split is None or len(segments) == 1:
        pieces, targets = [curve], [len(experts)]
    elif len(segments) == 2:
        pieces, targets = [curve[:split], curve[split:]], [end - start for start, end in segments]
    else:
        raise InvalidRequestError(f"MagCache expects at most two expert segments, got {len(segments)}")
    return np.concatenate(
        [np.stack([nearest_interp(piece[:, p], n) for p in range(2)], axis=1) for piece, n in zip(pieces, targets)]
    )


def magcache_reuse(
    ratios: np.ndarray, experts: np.ndarray, *, threshold: float, max_skips: int, retention_ratio: float
) -> np.ndarray:
    """[S] bool, True where the blocks are skipped: `ratios` [S, P] per pass, decided jointly.

    Per expert segment of n steps, the first int(retention_ratio * n + 0.5) steps compute; after
    that each pass accumulates ratio *= r, steps += 1, err += |1 - ratio|, and the step reuses
    iff a residual of this expert exists and, for every pass, err <= threshold and
    steps <= max_skips; otherwise it computes and every pass restarts (diffusers' hook rule).
    """
    reuse = np.zeros(len(experts), dtype=bool)
    for start, end in expert_segments(experts):
        retained = int(retention_ratio * (end - start) + 0.5)
        ratio = np.ones(ratios.shape[1])
        steps = np.zeros(ratios.shape[1], dtype=int)
        err = np.zeros(ratios.shape[1])
        for i in range(start + retained, end):
            ratio *= ratios[i]
            steps += 1
            err += np.abs(1.0 - ratio)
            if i > start and (err <= threshold).all() and (steps <= max_skips).all():
                reuse[i] = True
            else:
                ratio[:], steps[:], err[:] = 1.0, 0, 0.0
    return reuse


def plan_magcache(settings: CacheSettings, experts: np.ndarray, *, uses_guidance: bool) -> CachePlan:
    """The MagCache plan: host-decided residual reuse; the cond curve alone without guidance."""
    ratios = ratios_for_steps(*settings.magcache_curve, experts)
    passes = ratios if uses_guidance else ratios[:, :1]
    reuse = magcache_reuse(
        passes,
        experts,
        threshold=settings.magcache_thresh,
        max_skips=settings.magcache_K,
        retention_ratio=settings.retention_ratio,
    )
    return attrs.evolve(CachePlan.dense(len(experts)), reuse_residual=reuse, policy="magcache")
