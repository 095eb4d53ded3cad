"""MagCache calibration on device: every step dense, reporting per pass and token the L2 norm of
the block residual (docs/caching.md, "Device semantics")."""

from __future__ import annotations

from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp

from wanjax.adapters.jax.denoising.caching.feature import Blocks, CacheState, DeviceFeature, StepReport

if TYPE_CHECKING:
    from wanjax.adapters.jax.denoising.step import Step
    from wanjax.adapters.jax.transformer.model import TimeEmbedding


def residual_norms(residual: jax.Array, copies: int) -> jax.Array:
    """residual [copies * B, S, D] -> per pass and token ||res||_2 [copies, S], float32, the
    batch rows of a pass averaged (the MagCache calibration measure)."""
    norms = jnp.linalg.norm(residual.astype(jnp.float32), axis=-1)  # [copies * B, S]
    return norms.reshape(copies, -1, norms.shape[-1]).mean(axis=1)


class CalibrationFeature(DeviceFeature):
    """Nothing per step, nothing carried: the blocks run and their residual is measured."""

    name = "magcache_calibration"

    def around_blocks(
        self, step: Step, tokens: jax.Array, time: TimeEmbedding, cache: CacheState, blocks: Blocks, copies: int
    ) -> tuple[jax.Array, CacheState, StepReport]:
        out = blocks(step, tokens, time.temb6)
        return out, cache, StepReport(residual_norms=residual_norms(out - tokens, copies))
