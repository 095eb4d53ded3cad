"""One entry point: the request's cache settings and the run's schedule -> its CachePlan."""

from __future__ import annotations

import attrs
import numpy as np

from wanjax.domain.caching.cfg_cache import plan_cfg_cache
from wanjax.domain.caching.device_rules import plan_sencache, plan_teacache
from wanjax.domain.caching.magcache import plan_magcache
from wanjax.domain.caching.plan import CachePlan
from wanjax.domain.caching.settings import CacheSettings
from wanjax.domain.errors import InvalidRequestError


def plan_cache(
    settings: CacheSettings, experts: np.ndarray, guidance_scales: np.ndarray, *, uses_guidance: bool
) -> CachePlan:
    """The plan of `settings.policy` for a run whose step i uses expert `experts[i]` [S] and
    guidance `guidance_scales[i]` [S]; `uses_guidance`: the unconditional pass runs at all."""
    policy = settings.policy
    if policy == "cfg_cache" and not (uses_guidance and (guidance_scales > 1.0).all()):
        raise InvalidRequestError(
            f"cache_policy=cfg_cache caches the unconditional pass, but guidance is off on some steps "
            f"(guidance scales {sorted(set(guidance_scales.tolist()))}): set every guidance scale above 1 "
            "or choose another cache_policy"
        )
    if policy == "magcache":
        return plan_magcache(settings, experts, uses_guidance=uses_guidance)
    if policy == "teacache":
        return plan_teacache(settings, experts)
    if policy == "cfg_cache":
        return plan_cfg_cache(settings, experts)
    if policy == "sencache":
        return plan_sencache(settings, experts)
    dense = CachePlan.dense(len(experts))
    if settings.magcache_calibration:
        return attrs.evolve(dense, calibrate=True, policy="magcache_calibration")
    return dense
