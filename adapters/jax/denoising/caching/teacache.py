"""TeaCache on device (docs/caching.md, "Device semantics"): skip the blocks, adding the cached
residual, while the accumulated rescaled change of the timestep-modulated input stays small."""

from __future__ import annotations

import dataclasses
import functools
from typing import TYPE_CHECKING, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from wanjax.adapters.jax.denoising.caching.feature import Blocks, CacheShapes, CacheState, DeviceFeature, StepReport
from wanjax.adapters.jax.denoising.caching.residual import ResidualCache
from wanjax.domain.caching.teacache import TeaCachePlan

if TYPE_CHECKING:
    from wanjax.adapters.jax.denoising.step import Step
    from wanjax.adapters.jax.transformer.model import TimeEmbedding


@functools.partial(
    jax.tree_util.register_dataclass, data_fields=["threshold", "coefficients"], meta_fields=["input_is_modulation"]
)
@dataclasses.dataclass(frozen=True)
class TeaCacheValues:
    """TeaCacheRule as arrays; which embedding it measures is static (it sets the state's shape)."""

    threshold: jax.Array  # float32 []
    coefficients: jax.Array  # float32 [K], highest power first
    input_is_modulation: bool  # measure e0 (the blocks' modulation) rather than e (the time embedding)


class TeaCacheState(NamedTuple):
    """TeaCache's running measure: the previous step's timestep embedding (all rows) and, per
    guidance pass (conditional first), the accumulated rescaled change since the blocks last ran;
    and the residual it reuses."""

    previous: jax.Array  # [copies * B, T, 6, D] (e0) or [copies * B, T, D] (e) float32
    accumulated: jax.Array  # [copies] float32
    residual: ResidualCache


def teacache_decision(
    tea: TeaCacheState, rule: TeaCacheValues, measured: jax.Array, may_reuse: jax.Array
) -> tuple[jax.Array, TeaCacheState]:
    """Whether this step reuses the cached residual, and the updated measure.

    measured: this step's e0 [copies * B, T, 6, D] or e [copies * B, T, D], float32, passes
    stacked (conditional rows first). Per pass p, acc_p += max(polyval(coefficients, rel_p), 0) with
    rel_p the relative L1 change of its rows; the batch reuses only when every pass would, and
    `may_reuse` is false on forced steps (then every accumulator restarts at 0).
    """
    copies = tea.accumulated.shape[0]
    current = measured.reshape(copies, -1)  # [P, rows of a pass * ...]
    previous = tea.previous.reshape(copies, -1)
    change = jnp.sum(jnp.abs(current - previous), axis=1) / jnp.sum(jnp.abs(previous), axis=1)  # [P]
    # the polynomial fits a distance; outside its fitted range it can dip below 0, which would let
    # an accumulator sink under any threshold (0 included): clamped, threshold 0 never reuses
    accumulated = tea.accumulated + jnp.maximum(jnp.polyval(rule.coefficients, change), 0.0)
    reuse = may_reuse & jnp.all(accumulated < rule.threshold)
    return reuse, tea._replace(previous=measured, accumulated=jnp.where(reuse, accumulated, 0.0))


class TeaCacheFeature(DeviceFeature):
    """Per step: force_compute (bool). Parameters: `TeaCacheValues`. State: `TeaCacheState`."""

    name = "teacache"

    def controls(self, plan: TeaCachePlan) -> tuple[np.ndarray, TeaCacheValues]:
        rule, f32 = plan.rule, functools.partial(np.asarray, dtype=np.float32)
        values = TeaCacheValues(f32(rule.threshold), f32(rule.coefficients), rule.input_is_modulation)
        return plan.force_compute.astype(bool), values

    def initial_state(self, params: TeaCacheValues, shapes: CacheShapes) -> TeaCacheState:
        rows = shapes.copies * shapes.latents[0]
        per_row = (6, shapes.width) if params.input_is_modulation else (shapes.width,)
        previous = jnp.zeros((rows, shapes.time_tokens, *per_row), jnp.float32)
        return TeaCacheState(previous, jnp.zeros((shapes.copies,), jnp.float32), ResidualCache.empty(shapes))

    def around_blocks(
        self, step: Step, tokens: jax.Array, time: TimeEmbedding, cache: CacheState, blocks: Blocks, copies: int
    ) -> tuple[jax.Array, CacheState, StepReport]:
        tea: TeaCacheState = cache[self.name]
        rule = step.controls.params
        measured = (time.temb6 if rule.input_is_modulation else time.temb).astype(jnp.float32)
        may_reuse = ~step.controls.steps & tea.residual.holds(step.values.expert)
        reuse, tea = teacache_decision(tea, rule, measured, may_reuse)
        out, residual = tea.residual.blocks_or_residual(reuse, step, tokens, time.temb6, blocks)
        return out, {**cache, self.name: tea._replace(residual=residual)}, StepReport(blocks=~reuse)
