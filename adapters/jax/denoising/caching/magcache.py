"""MagCache on device: skip the blocks on the steps the host decided, adding the cached residual."""

from __future__ import annotations

from typing import TYPE_CHECKING

import jax

from wanjax.adapters.jax.denoising.caching.feature import Blocks, CacheShapes, CacheState, DeviceFeature, StepReport
from wanjax.adapters.jax.denoising.caching.residual import ResidualCache
from wanjax.domain.caching.magcache import MagCachePlan

if TYPE_CHECKING:
    from wanjax.adapters.jax.denoising.step import Step
    from wanjax.adapters.jax.transformer.model import TimeEmbedding


class MagCacheFeature(DeviceFeature):
    """Per step: reuse_residual (bool). State: the `ResidualCache`."""

    name = "magcache"

    def controls(self, plan: MagCachePlan) -> tuple[jax.Array, None]:
        return plan.reuse_residual.astype(bool), None

    def initial_state(self, params: None, shapes: CacheShapes) -> ResidualCache:
        return ResidualCache.empty(shapes)

    def around_blocks(
        self, step: Step, tokens: jax.Array, time: TimeEmbedding, cache: CacheState, blocks: Blocks, copies: int
    ) -> tuple[jax.Array, CacheState, StepReport]:
        residual: ResidualCache = cache[self.name]
        reuse = step.controls.steps & residual.holds(step.values.expert)
        out, residual = residual.blocks_or_residual(reuse, step, tokens, time.temb6, blocks)
        return out, {**cache, self.name: residual}, StepReport(blocks=~reuse)
