"""One entry point: the request's cache settings and the run's schedule -> its CachePlan, made of
the plans of the policies the request turns on (domain/caching/registry.py)."""

from __future__ import annotations

import numpy as np

from wanjax.domain.caching.plan import CachePlan
from wanjax.domain.caching.policy import RunSchedule
from wanjax.domain.caching.settings import CacheSettings


def plan_cache(
    settings: CacheSettings, experts: np.ndarray, guidance_scales: np.ndarray, *, uses_guidance: bool
) -> CachePlan:
    """The plan of the policies `settings` turns on for a run whose step i uses expert
    `experts[i]` [S] and guidance `guidance_scales[i]` [S]; `uses_guidance`: the unconditional
    pass runs at all."""
    run = RunSchedule(
        experts=experts, guidance_scales=guidance_scales, uses_guidance=uses_guidance, published=settings.published
    )
    on = settings.policies_on()
    plans = [policy.plan(section, run) for policy, section in on]
    return CachePlan.of(len(experts), *plans, policy="+".join(policy.name for policy, _ in on) or "none")
