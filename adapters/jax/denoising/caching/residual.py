"""The cached block residual MagCache and TeaCache reuse: the blocks' output minus their input at
the last step they ran, per batch row, and the choice between running the blocks and adding it."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import jax
import jax.numpy as jnp

from wanjax.adapters.jax.denoising.caching.feature import NO_EXPERT, Blocks, CacheShapes

if TYPE_CHECKING:
    from wanjax.adapters.jax.denoising.step import Step


class ResidualCache(NamedTuple):
    residual: jax.Array  # [copies * B, S, D] activation dtype
    expert: jax.Array  # int32 []: the expert that computed it (NO_EXPERT: none yet)

    @classmethod
    def empty(cls, shapes: CacheShapes) -> ResidualCache:
        rows = shapes.copies * shapes.latents[0]
        return cls(jnp.zeros((rows, shapes.tokens, shapes.width), shapes.activation_dtype), jnp.int32(NO_EXPERT))

    def holds(self, expert: jax.Array) -> jax.Array:
        """Whether it may stand in at a step of `expert`: computed by the same expert."""
        return self.expert == expert

    def blocks_or_residual(
        self, reuse: jax.Array, step: Step, tokens: jax.Array, temb6: jax.Array, blocks: Blocks
    ) -> tuple[jax.Array, ResidualCache]:
        """tokens + the cached residual where `reuse`, else the blocks run and their residual is kept
        (lax.cond: the skipped branch does not execute)."""

        def reused(step: Step, tokens: jax.Array, temb6: jax.Array) -> tuple[jax.Array, jax.Array]:
            return tokens + self.residual, self.residual

        def computed(step: Step, tokens: jax.Array, temb6: jax.Array) -> tuple[jax.Array, jax.Array]:
            out = blocks(step, tokens, temb6)
            return out, out - tokens

        out, residual = jax.lax.cond(reuse, reused, computed, step, tokens, temb6)
        return out, ResidualCache(residual, step.values.expert)
