"""SenCache on device (docs/caching.md, "Device semantics"): reuse the last guided prediction,
with no transformer call at all, while the drift since it was computed stays under the threshold."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from wanjax.adapters.jax.denoising.caching.feature import (
    NO_EXPERT,
    CacheShapes,
    CacheState,
    DeviceFeature,
    Predict,
    Result,
    StepReport,
)
from wanjax.domain.caching.sencache import SenCachePlan

if TYPE_CHECKING:
    from wanjax.adapters.jax.denoising.step import Step


class SenCacheValues(NamedTuple):
    """SenCacheRule as arrays."""

    threshold: jax.Array  # float32 []
    alpha_x: jax.Array  # float32 []
    alpha_t: jax.Array  # float32 []
    max_reuse: jax.Array  # int32 []


class SenCacheState(NamedTuple):
    """The guided prediction of the last computed step, where and when it was computed, the
    drift accumulated since, and how many steps in a row have reused it."""

    velocity: jax.Array  # [B, F, H, W, C] scheduler dtype: y_ref
    sample: jax.Array  # [B, F, H, W, C] scheduler dtype: x_ref
    timestep: jax.Array  # float32 []: t_ref, in units of 1000
    drift_x: jax.Array  # float32 []: acc_x
    drift_t: jax.Array  # float32 []: acc_t
    reused: jax.Array  # int32 []: n
    expert: jax.Array  # int32 []


def sencache_decision(
    sen: SenCacheState, rule: SenCacheValues, sample: jax.Array, timestep: jax.Array, may_reuse: jax.Array
) -> tuple[jax.Array, SenCacheState]:
    """Whether this step reuses the last guided prediction, and the state after a reuse.

    sample: the latents x_i [B, F, H, W, C] entering the step; timestep: t_i in 0..1000.
    The drift accumulates the RMS distance to x_ref and |t_i / 1000 - t_ref| every step since
    the last computed one; `may_reuse` is false on forced steps and after an expert switch.
    """
    distance = jnp.sqrt(jnp.mean(jnp.square((sample - sen.sample).astype(jnp.float32))))
    drift_x = sen.drift_x + distance
    drift_t = sen.drift_t + jnp.abs(timestep / 1000.0 - sen.timestep)
    score = rule.alpha_x * drift_x + rule.alpha_t * drift_t
    reuse = may_reuse & (score <= rule.threshold) & (sen.reused < rule.max_reuse)
    return reuse, sen._replace(drift_x=drift_x, drift_t=drift_t, reused=sen.reused + 1)


class SenCacheFeature(DeviceFeature):
    """Per step: force_compute (bool). Parameters: `SenCacheValues`. State: `SenCacheState`."""

    name = "sencache"

    def controls(self, plan: SenCachePlan) -> tuple[np.ndarray, SenCacheValues]:
        rule, f32 = plan.rule, functools.partial(np.asarray, dtype=np.float32)
        values = SenCacheValues(f32(rule.threshold), f32(rule.alpha_x), f32(rule.alpha_t), np.int32(rule.max_reuse))
        return plan.force_compute.astype(bool), values

    def initial_state(self, params: SenCacheValues, shapes: CacheShapes) -> SenCacheState:
        latents, zero = jnp.zeros(shapes.latents, shapes.scheduler_dtype), jnp.float32(0.0)
        return SenCacheState(latents, latents, zero, zero, zero, jnp.int32(0), jnp.int32(NO_EXPERT))

    def around_prediction(self, step: Step, x: jax.Array, cache: CacheState, predict: Predict) -> Result:
        sen: SenCacheState = cache[self.name]
        values, controls = step.values, step.controls
        may_reuse = ~controls.steps & (sen.expert == values.expert)
        reuse, after_reuse = sencache_decision(sen, controls.params, x, values.timestep, may_reuse)

        def reused(step: Step, cache: CacheState) -> tuple[jax.Array, CacheState]:
            return sen.velocity, {**cache, self.name: after_reuse}

        def computed(step: Step, cache: CacheState) -> tuple[jax.Array, CacheState]:
            velocity, cache, _ = predict(step, cache)
            velocity = velocity.astype(sen.velocity.dtype)
            zero = jnp.float32(0.0)
            reference = SenCacheState(velocity, x, values.timestep / 1000.0, zero, zero, jnp.int32(0), values.expert)
            return velocity, {**cache, self.name: reference}

        velocity, cache = jax.lax.cond(reuse, reused, computed, step, cache)
        return velocity, cache, StepReport(transformer=~reuse)
