"""The CFG cache on device (FasterCache; docs/caching.md, "Device semantics"): on its steps only
the conditional rows run, through the guider's conditional layout, and the unconditional
prediction is estimated from the last full step's difference, weighted by frequency."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from wanjax.adapters.jax.denoising.caching.feature import (
    NO_EXPERT,
    CacheShapes,
    CacheState,
    DeviceFeature,
    Passes,
    Result,
    StepReport,
)
from wanjax.adapters.jax.denoising.guider import Guider
from wanjax.domain.caching.cfg_cache import CfgCachePlan

if TYPE_CHECKING:
    from wanjax.adapters.jax.denoising.step import Step


class CfgCacheSteps(NamedTuple):
    """One step's values ([], weights [2]), or all steps' ([S], [S, 2])."""

    cond_only: jax.Array  # bool: run the conditional rows only
    weights: jax.Array  # float32: (low, high)-frequency weights of the estimate


class GuidanceCache(NamedTuple):
    """The unconditional minus the conditional prediction at the last step that ran both."""

    difference: jax.Array  # [B, F, H, W, C] float32
    expert: jax.Array  # int32 []


def low_frequency_mask(height: int, width: int) -> np.ndarray:
    """[H, W // 2 + 1] float32: 1 on the low frequencies of an rfft2 over (H, W) (the first and
    last quarter of the rows, the first quarter of the half-spectrum's columns), 0 elsewhere."""
    columns = width // 2 + 1
    rows_kept, columns_kept = max(1, height // 4), max(1, columns // 4)
    a = np.arange(height)[:, None]
    b = np.arange(columns)[None, :]
    low = ((a < rows_kept) | (a >= height - rows_kept + 1)) & (b < columns_kept)
    return low.astype(np.float32)


def estimate_unconditional(conditional: jax.Array, difference: jax.Array, weights: jax.Array) -> jax.Array:
    """FasterCache's CFG-cache estimate: conditional [B, F, H, W, C] plus the cached
    (unconditional - conditional) difference with its low- and high-frequency parts (over the
    spatial axes H, W) weighted by weights = (w_low, w_high). float32."""
    height, width = difference.shape[2:4]
    spectrum = jnp.fft.rfft2(difference.astype(jnp.float32), axes=(2, 3))  # [B, F, H, W//2 + 1, C]
    low = jnp.asarray(low_frequency_mask(height, width))[:, :, None]  # [H, W//2 + 1, 1]
    gain = weights[0] * low + weights[1] * (1.0 - low)
    return conditional + jnp.fft.irfft2(spectrum * gain, s=(height, width), axes=(2, 3))


class CfgCacheFeature(DeviceFeature):
    """Per step: `CfgCacheSteps`. State: the `GuidanceCache`."""

    name = "cfg_cache"

    def controls(self, plan: CfgCachePlan) -> tuple[CfgCacheSteps, None]:
        return CfgCacheSteps(plan.cond_only.astype(bool), plan.cfg_weights.astype(np.float32)), None

    def initial_state(self, params: None, shapes: CacheShapes) -> GuidanceCache:
        return GuidanceCache(jnp.zeros(shapes.latents, jnp.float32), jnp.int32(NO_EXPERT))

    def around_guidance(self, step: Step, x: jax.Array, guider: Guider, cache: CacheState, passes: Passes) -> Result:
        values, planned, batch = step.values, step.controls.steps, x.shape[0]

        def both_passes(step: Step, cache: CacheState) -> tuple[jax.Array, jax.Array, CacheState]:
            velocity, cache, _ = passes(step, guider, cache)
            conditional, unconditional = guider.split(velocity)
            difference = GuidanceCache(unconditional - conditional, values.expert)  # [B, F', H', W', C] float32
            return conditional, unconditional, {**cache, self.name: difference}

        def conditional_pass(step: Step, cache: CacheState) -> tuple[jax.Array, jax.Array, CacheState]:
            step = step._replace(text=guider.conditional_text(step.text, batch))
            conditional, cache, _ = passes(step, guider.conditional, cache)
            unconditional = estimate_unconditional(conditional, cache[self.name].difference, planned.weights)
            return conditional, unconditional, cache

        cond_only = planned.cond_only & (cache[self.name].expert == values.expert)
        conditional, unconditional, cache = jax.lax.cond(cond_only, conditional_pass, both_passes, step, cache)
        guided = guider.guided(conditional, unconditional, values.guidance_scale)
        return guided, cache, StepReport(unconditional=~cond_only)
