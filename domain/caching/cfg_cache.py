"""CFG cache (FasterCache, arXiv 2410.19355): which steps run the conditional pass only, and the
low/high-frequency weights of the unconditional estimate (docs/caching.md, "CFG cache")."""

from __future__ import annotations

import attrs
import numpy as np

from wanjax.domain.caching.plan import CachePlan
from wanjax.domain.caching.schedule import expert_segments, step_fraction
from wanjax.domain.caching.settings import CacheSettings


def cond_only_steps(experts: np.ndarray, *, interval: int, start_ratio: float, end_ratio: float) -> np.ndarray:
    """[S] bool: inside [int(S * start_ratio), int(S * end_ratio)), every step but each
    `interval`-th runs cond-only, once a full step of the same expert came before it; with two
    experts the high-noise one never caches (maxdiffusion's Wan 2.2 schedule)."""
    num_steps = len(experts)
    start, end = step_fraction(num_steps, start_ratio), step_fraction(num_steps, end_ratio)
    cond_only = np.zeros(num_steps, dtype=bool)
    segments = expert_segments(experts)
    for index, (first, last) in enumerate(segments):
        if len(segments) == 2 and index == 0:
            continue
        seen_full = False
        for i in range(first, last):
            cond_only[i] = seen_full and start <= i < end and (i - start) % interval != 0
            seen_full = seen_full or not cond_only[i]
    return cond_only


def frequency_weights(experts: np.ndarray, alpha: float) -> np.ndarray:
    """[S, 2] float32 (w_low, w_high): (1 + alpha, 1) before the phase change, (1, 1 + alpha) from
    it on; the phase change is step S // 2 with one expert, the first low-noise step with two."""
    segments = expert_segments(experts)
    phase_change = segments[1][0] if len(segments) == 2 else len(experts) // 2
    late = np.arange(len(experts)) >= phase_change
    return np.stack([np.where(late, 1.0, 1.0 + alpha), np.where(late, 1.0 + alpha, 1.0)], axis=1).astype(np.float32)


def plan_cfg_cache(settings: CacheSettings, experts: np.ndarray) -> CachePlan:
    cond_only = cond_only_steps(
        experts,
        interval=settings.cfg_cache_interval,
        start_ratio=settings.cfg_cache_start_ratio,
        end_ratio=settings.cfg_cache_end_ratio,
    )
    weights = frequency_weights(experts, settings.cfg_cache_alpha)
    return attrs.evolve(CachePlan.dense(len(experts)), cond_only=cond_only, cfg_weights=weights, policy="cfg_cache")
