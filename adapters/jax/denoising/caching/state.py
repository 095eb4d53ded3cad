"""What a denoising loop hands its step to execute a `CachePlan`: the controls of the plan's
device feature (its per-step values and its parameters) and the state it carries from step to
step, keyed by feature (adapters/jax/denoising/caching/registry.py).

The structure of both depends only on which feature is on, never on its values: a dense plan
carries nothing and compiles the plain step; changing which steps reuse, the CFG weights or a
rule's threshold never recompiles.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax

from wanjax.adapters.jax.denoising.caching.feature import CacheShapes, CacheState, DeviceFeature
from wanjax.adapters.jax.denoising.caching.registry import FEATURES
from wanjax.domain.caching.plan import CachePlan
from wanjax.domain.errors import ConfigError

PLAIN = DeviceFeature()
"""The dense plan's feature: every hook passes through."""


@dataclasses.dataclass(frozen=True)
class CacheControls:
    """A CachePlan for the device loops: which feature runs (static: part of the structure), its
    per-step values (arrays [S, ...], or one step's) and its parameters (numpy until a jitted call
    takes them). At most one feature is on (domain/caching/combinations.py)."""

    feature: str
    steps: Any
    params: Any

    @classmethod
    def of(cls, plan: CachePlan) -> CacheControls:
        if plan.is_dense:
            return NO_CACHE
        acting = plan.acting
        if len(acting) > 1:
            raise ConfigError(
                f"this cache plan combines {' and '.join(acting)}; the denoiser runs one step cache "
                "at a time: choose one cache_policy (magcache_calibration runs with cache_policy=none)"
            )
        ((name, feature_plan),) = acting.items()
        return cls(name, *FEATURES[name].controls(feature_plan))

    def at(self, i: int) -> CacheControls:
        """Step i's values (the Python loop); the parameters as they are."""
        return dataclasses.replace(self, steps=jax.tree.map(lambda a: a[i], self.steps))

    @property
    def device_feature(self) -> DeviceFeature:
        return PLAIN if self.feature == NO_CACHE.feature else FEATURES[self.feature]


jax.tree_util.register_dataclass(CacheControls, data_fields=["steps", "params"], meta_fields=["feature"])

NO_CACHE = CacheControls("none", None, None)
"""The dense plan's controls: nothing carried, nothing decided, the plain step."""


def initial_cache_state(controls: CacheControls, shapes: CacheShapes) -> CacheState:
    """The state of the feature `controls` runs, under its name (empty for a dense plan)."""
    if controls.feature == NO_CACHE.feature:
        return {}
    return {controls.feature: controls.device_feature.initial_state(controls.params, shapes)}
