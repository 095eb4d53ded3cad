"""TeaCache and SenCache: the decision depends on data, so the plan carries a rule the device
loop evaluates, plus the steps it must compute whatever it measures (docs/caching.md)."""

from __future__ import annotations

import attrs
import numpy as np

from wanjax.domain.caching.plan import CachePlan, DeviceRule, SenCacheRule, TeaCacheRule
from wanjax.domain.caching.schedule import first_steps, step_fraction
from wanjax.domain.caching.settings import CacheSettings

TEACACHE_RET_STEPS = 5
"""TeaCache4Wan2.1 with use_ret_steps: the first 5 steps (10 passes) always compute."""


def teacache_forced(experts: np.ndarray, *, use_ret_steps: bool) -> np.ndarray:
    """[S] bool: steps TeaCache computes whatever it measures. With use_ret_steps the first
    TEACACHE_RET_STEPS; without, the first and the last step (TeaCache4Wan2.1's cutoff); and
    the first step of each expert."""
    forced = first_steps(experts)
    if use_ret_steps:
        forced[:TEACACHE_RET_STEPS] = True
    else:
        forced[[0, -1]] = True
    return forced


def sencache_forced(experts: np.ndarray, *, start_ratio: float, end_ratio: float) -> np.ndarray:
    """[S] bool: steps SenCache computes whatever it measures: step 0, the first
    int(S * start_ratio), those from int(S * (1 - end_ratio)) on, the first of each expert."""
    num_steps = len(experts)
    forced = first_steps(experts)
    forced[: step_fraction(num_steps, start_ratio)] = True
    forced[step_fraction(num_steps, 1.0 - end_ratio) :] = True
    return forced


def _rule_plan(rule: DeviceRule, forced: np.ndarray, policy: str) -> CachePlan:
    return attrs.evolve(CachePlan.dense(len(forced)), force_compute=forced, rule=rule, policy=policy)


def plan_teacache(settings: CacheSettings, experts: np.ndarray) -> CachePlan:
    rule = TeaCacheRule(
        threshold=settings.teacache_thresh,
        coefficients=settings.teacache_polynomial,
        input_is_modulation=settings.teacache_use_ret_steps,
    )
    return _rule_plan(rule, teacache_forced(experts, use_ret_steps=settings.teacache_use_ret_steps), "teacache")


def plan_sencache(settings: CacheSettings, experts: np.ndarray) -> CachePlan:
    rule = SenCacheRule(
        threshold=settings.sencache_thresh,
        alpha_x=settings.sencache_alpha_x,
        alpha_t=settings.sencache_alpha_t,
        max_reuse=settings.sencache_K,
    )
    forced = sencache_forced(
        experts, start_ratio=settings.sencache_start_ratio, end_ratio=settings.sencache_end_ratio
    )
    return _rule_plan(rule, forced, "sencache")
