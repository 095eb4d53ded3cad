"""Every step cache's device feature, by its policy's name (domain/caching/registry.py): a new
policy's feature is its own module and one line here (docs/caching.md, "How to add a policy")."""

from __future__ import annotations

from wanjax.adapters.jax.denoising.caching import calibration, cfg_cache, dbcache, magcache, sencache, teacache
from wanjax.adapters.jax.denoising.caching.feature import DeviceFeature

FEATURES: dict[str, DeviceFeature] = {
    feature.name: feature
    for feature in (
        magcache.MagCacheFeature(),
        teacache.TeaCacheFeature(),
        cfg_cache.CfgCacheFeature(),
        sencache.SenCacheFeature(),
        dbcache.DBCacheFeature(),
        calibration.CalibrationFeature(),
    )
}
