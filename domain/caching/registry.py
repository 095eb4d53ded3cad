"""Every step-cache policy, by name: a new policy is its own module and one line here
(docs/caching.md, "How to add a policy")."""

from __future__ import annotations

from wanjax.domain.caching import calibration, cfg_cache, dbcache, magcache, sencache, teacache
from wanjax.domain.caching.policy import CachePolicy

REGISTRY: dict[str, CachePolicy] = {
    policy.name: policy
    for policy in (
        magcache.MAGCACHE,
        calibration.MAGCACHE_CALIBRATION,
        teacache.TEACACHE,
        cfg_cache.CFG_CACHE,
        sencache.SENCACHE,
        dbcache.DBCACHE,
    )
}
