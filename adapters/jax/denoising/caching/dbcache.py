"""DBCache on device (cache-dit 1.5.3's Dual Block Cache; docs/caching.md, "DBCache"): the first
Fn blocks run; per guidance pass, the relative L1 change of their residual since the pass's last
computed step decides whether the middle blocks run or their residual's forecast (the cached
residual itself, or TaylorSeer's polynomial) is added instead; the last Bn blocks run.

cache-dit runs the conditional and the unconditional pass as separate transformer calls, each
with its own buffers and counters; here both are rows of one batch, so each pass decides apart,
and the middle blocks are skipped when every pass reuses (otherwise they run on the whole batch
and the reusing rows take their forecast instead of the blocks' output).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import TYPE_CHECKING, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from wanjax.adapters.jax.denoising.caching.feature import (
    NO_EXPERT,
    Blocks,
    CacheShapes,
    CacheState,
    DeviceFeature,
    StepReport,
)
from wanjax.adapters.jax.denoising.caching.taylorseer import TaylorSeerState
from wanjax.domain.caching.dbcache import DBCachePlan

if TYPE_CHECKING:
    from wanjax.adapters.jax.denoising.step import Step
    from wanjax.adapters.jax.transformer.model import TimeEmbedding


@functools.partial(
    jax.tree_util.register_dataclass,
    data_fields=["threshold", "max_cached", "max_continuous"],
    meta_fields=["first_blocks", "last_blocks", "order"],
)
@dataclasses.dataclass(frozen=True)
class DBCacheValues:
    """DBCacheRule as arrays; the block ranges and the forecast's order are static (they shape
    the graph and the state)."""

    threshold: jax.Array  # float32 []
    max_cached: jax.Array  # int32 []: negative: no limit
    max_continuous: jax.Array  # int32 []: negative: no limit
    first_blocks: int  # Fn
    last_blocks: int  # Bn
    order: int  # TaylorSeer's order; 0: the cached residual as it is

    @property
    def first(self) -> slice:
        return slice(0, self.first_blocks)

    @property
    def middle(self) -> slice:
        return slice(self.first_blocks, -self.last_blocks if self.last_blocks else None)

    @property
    def last(self) -> slice:
        return slice(-self.last_blocks, None)


class DBCacheState(NamedTuple):
    """Per guidance pass, since the current expert's first step (cache-dit's context): the first
    blocks' residual at the pass's last computed step, the middle blocks' residual ladder, the
    steps it reused and how many of them in a row; the context's step count and expert."""

    first_residual: jax.Array  # [copies * B, S, D] activation dtype
    middle: TaylorSeerState
    reused: jax.Array  # [copies] int32
    in_a_row: jax.Array  # [copies] int32
    count: jax.Array  # int32 []: steps of this context before this one
    expert: jax.Array  # int32 []


def relative_change(previous: jax.Array, current: jax.Array, copies: int) -> jax.Array:
    """[copies] float32: per pass, mean|previous - current| / mean|previous| over its rows
    (cache-dit's `similarity`; the means' common count cancels)."""
    previous, current = previous.astype(jnp.float32), current.astype(jnp.float32)
    change = jnp.sum(jnp.abs(previous - current), axis=(1, 2)).reshape(copies, -1).sum(axis=1)
    size = jnp.sum(jnp.abs(previous), axis=(1, 2)).reshape(copies, -1).sum(axis=1)
    return change / size


def dbcache_decision(db: DBCacheState, rule: DBCacheValues, change: jax.Array, may_reuse: jax.Array) -> jax.Array:
    """[copies] bool: which passes reuse (cache-dit's `can_cache`): `may_reuse` (not a warm-up
    step, not a context's first), under both limits, and a change below the threshold (a
    threshold <= 0 never reuses, one >= 1 always does)."""
    under_total = (rule.max_cached < 0) | (db.reused < rule.max_cached)
    under_in_a_row = (rule.max_continuous < 0) | (db.in_a_row < rule.max_continuous)
    similar = (rule.threshold > 0) & ((rule.threshold >= 1) | (change < rule.threshold))
    return may_reuse & under_total & under_in_a_row & similar


class DBCacheFeature(DeviceFeature):
    """Per step: force_compute (bool). Parameters: `DBCacheValues`. State: `DBCacheState`."""

    name = "dbcache"

    def controls(self, plan: DBCachePlan) -> tuple[np.ndarray, DBCacheValues]:
        rule = plan.rule
        values = DBCacheValues(
            np.float32(rule.threshold),
            np.int32(rule.max_cached),
            np.int32(rule.max_continuous),
            rule.first_blocks,
            rule.last_blocks,
            rule.taylorseer_order or 0,
        )
        return plan.force_compute.astype(bool), values

    def initial_state(self, params: DBCacheValues, shapes: CacheShapes) -> DBCacheState:
        rows, per_pass = shapes.copies * shapes.latents[0], jnp.zeros((shapes.copies,), jnp.int32)
        first = jnp.zeros((rows, shapes.tokens, shapes.width), shapes.activation_dtype)
        middle = TaylorSeerState.empty(
            params.order, shapes.copies, rows, shapes.tokens, shapes.width, shapes.activation_dtype
        )
        return DBCacheState(first, middle, per_pass, per_pass, jnp.int32(0), jnp.int32(NO_EXPERT))

    def around_blocks(
        self, step: Step, tokens: jax.Array, time: TimeEmbedding, cache: CacheState, blocks: Blocks, copies: int
    ) -> tuple[jax.Array, CacheState, StepReport]:
        db: DBCacheState = cache[self.name]
        rule, temb6, rows = step.controls.params, time.temb6, tokens.shape[0]
        fresh = db.expert != step.values.expert  # a new context: nothing of the other expert's is reused
        zero = jnp.zeros_like(db.reused)
        db = db._replace(
            middle=db.middle.restarted(fresh),
            reused=jnp.where(fresh, zero, db.reused),
            in_a_row=jnp.where(fresh, zero, db.in_a_row),
            count=jnp.where(fresh, 0, db.count),
        )
        calibrator_step = db.count - 1  # cache-dit's calibrator counts from -1 in a context
        first = blocks(step, tokens, temb6, rule.first)
        first_residual = first - tokens
        change = relative_change(db.first_residual, first_residual, copies)
        may_reuse = ~step.controls.steps & ~fresh
        reuse = dbcache_decision(db, rule, change, may_reuse)  # [copies]
        reuse_rows = jnp.repeat(reuse, rows // copies, total_repeat_length=rows)[:, None, None]
        forecast = db.middle.forecast(calibrator_step)

        def reused(step: Step, first: jax.Array) -> tuple[jax.Array, TaylorSeerState]:
            return forecast + first, db.middle

        def computed(step: Step, first: jax.Array) -> tuple[jax.Array, TaylorSeerState]:
            middle = blocks(step, first, temb6, rule.middle)
            out = jnp.where(reuse_rows, forecast + first, middle)
            return out, db.middle.updated(middle - first, ~reuse, calibrator_step)

        out, ladder = jax.lax.cond(jnp.all(reuse), reused, computed, step, first)
        if rule.last_blocks:
            out = blocks(step, out, temb6, rule.last)
        db = DBCacheState(
            first_residual=jnp.where(reuse_rows, db.first_residual, first_residual),
            middle=ladder,
            reused=db.reused + reuse,
            in_a_row=jnp.where(reuse, db.in_a_row + 1, 0),
            count=db.count + 1,
            expert=step.values.expert,
        )
        return out, {**cache, self.name: db}, StepReport(blocks=~jnp.all(reuse), pass_blocks=~reuse)
