"""The Wan 2.2 VAE's down and up blocks: a resampling main path plus a parameter-free shortcut.

The shortcut folds space (and time) into channels and averages (down), or repeats
channels and unfolds them (up), so each level learns a residual over plain
resampling. Same chunk/cache contract as `blocks.py`: `(x, cache) -> (y, cache)`,
cache None on the first chunk.
"""

from __future__ import annotations

import jax
from flax import nnx

from wanjax.adapters.jax.vae.blocks import Cache, Downsample, Upsample, residual_chain, run_blocks
from wanjax.adapters.jax.vae.runtime import VaeRuntime
from wanjax.adapters.jax.vae.shuffles import avg_down, dup_up
from wanjax.domain.errors import UnsupportedModelError


def _check_fold(kind: str, channels: int, other: int, factor: int) -> None:
    if channels * factor % other:
        raise UnsupportedModelError(
            f"vae {kind} shortcut cannot map {channels} channels x {factor} folded positions onto "
            f"{other} channels; check base_dim / decoder_base_dim and dim_mult"
        )


class ResidualDownBlock(nnx.Module):
    """diffusers' WanResidualDownBlock: residual blocks, then an optional (time and) space downsample.

    The shortcut averages the block's input over the same (2 or 1, 2, 2) neighbourhoods
    the downsample merges; the last level neither downsamples nor folds.
    """

    def __init__(
        self,
        in_dim: int,
        out_dim: int,
        runtime: VaeRuntime,
        *,
        num_res_blocks: int,
        temporal: bool,
        down: bool,
        rngs: nnx.Rngs,
    ) -> None:
        self.out_dim = out_dim
        self.factor_t = 2 if temporal else 1
        self.factor_s = 2 if down else 1
        _check_fold("down", in_dim, out_dim, self.factor_t * self.factor_s**2)
        self.resnets = residual_chain(in_dim, out_dim, num_res_blocks, runtime, rngs=rngs)
        self.downsampler = Downsample(out_dim, runtime, temporal=temporal, rngs=rngs) if down else None

    def __call__(self, x: jax.Array, cache: Cache) -> tuple[jax.Array, Cache]:
        res_caches, down_cache = (None, None) if cache is None else cache
        shortcut = avg_down(x, self.out_dim, self.factor_t, self.factor_s)
        x, res_caches = run_blocks(self.resnets, x, res_caches)
        if self.downsampler is not None:
            x, down_cache = self.downsampler(x, down_cache)
        return x + shortcut, (res_caches, down_cache)


class ResidualUpBlock(nnx.Module):
    """diffusers' WanResidualUpBlock: `num_res_blocks + 1` residual blocks, then an optional upsample.

    Unlike the Wan 2.1 up block, the upsample keeps the channel count (`out_dim`), and
    the shortcut repeats the block's input over the (2 or 1, 2, 2) neighbourhoods the
    upsample creates. On the first chunk (cache None) the temporal upsample yields one
    frame per frame, so the shortcut drops its extra leading frame.
    """

    def __init__(
        self,
        in_dim: int,
        out_dim: int,
        runtime: VaeRuntime,
        *,
        num_res_blocks: int,
        temporal: bool,
        up: bool,
        rngs: nnx.Rngs,
    ) -> None:
        self.out_dim = out_dim
        self.factor_t = 2 if temporal else 1
        if up:
            _check_fold("up", out_dim, in_dim, self.factor_t * 4)
        self.resnets = residual_chain(in_dim, out_dim, num_res_blocks + 1, runtime, rngs=rngs)
        self.upsampler = Upsample(out_dim, out_dim, runtime, temporal=temporal, rngs=rngs) if up else None

    def __call__(self, x: jax.Array, cache: Cache) -> tuple[jax.Array, Cache]:
        first_chunk = cache is None
        res_caches, up_cache = (None, None) if first_chunk else cache
        shortcut = x
        x, res_caches = run_blocks(self.resnets, x, res_caches)
        if self.upsampler is not None:
            x, up_cache = self.upsampler(x, up_cache)
            x = x + dup_up(shortcut, self.out_dim, self.factor_t, 2, first_chunk=first_chunk)
        return x, (res_caches, up_cache)
