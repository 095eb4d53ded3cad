"""The Wan 2.1 VAE encoder: video chunk [B, T, H, W, 3] -> moments [B, T', H/s, W/s, 2 * z_dim]."""

from __future__ import annotations

import jax
from flax import nnx

from wanjax.adapters.jax.vae.blocks import Cache, Downsample, MidBlock, ResidualBlock
from wanjax.adapters.jax.vae.layers import CausalConv3d, RMSNorm
from wanjax.adapters.jax.vae.runtime import VaeRuntime
from wanjax.domain.specs import VaeSpec


class Encoder3d(nnx.Module):
    """Causal 3D encoder (diffusers' WanEncoder3d, non-residual Wan 2.1 layout).

    `down_blocks` is one flat list as in diffusers: per level, `num_res_blocks`
    residual blocks, then a spatial (and, per `temperal_downsample`, temporal)
    downsample except at the last level.
    """

    def __init__(self, spec: VaeSpec, runtime: VaeRuntime, *, rngs: nnx.Rngs) -> None:
        dims = [spec.base_dim * m for m in (1, *spec.dim_mult)]
        self.conv_in = CausalConv3d(3, dims[0], (3, 3, 3), runtime, padding=(1, 1, 1), rngs=rngs)
        blocks: list[nnx.Module] = []
        last_level = len(spec.dim_mult) - 1
        for level, (in_dim, out_dim) in enumerate(zip(dims[:-1], dims[1:])):
            for _ in range(spec.num_res_blocks):
                blocks.append(ResidualBlock(in_dim, out_dim, runtime, rngs=rngs))
                in_dim = out_dim
            if level != last_level:
                temporal = spec.temperal_downsample[level]
                blocks.append(Downsample(out_dim, runtime, temporal=temporal, rngs=rngs))
        self.down_blocks = nnx.List(blocks)
        self.mid_block = MidBlock(dims[-1], runtime, rngs=rngs)
        self.norm_out = RMSNorm(dims[-1], runtime, images=False)
        self.conv_out = CausalConv3d(
            dims[-1], 2 * spec.z_dim, (3, 3, 3), runtime, padding=(1, 1, 1), rngs=rngs
        )

    def __call__(self, x: jax.Array, cache: Cache) -> tuple[jax.Array, Cache]:
        """One chunk `x` [B, T, H, W, 3] and the previous chunk's cache (None first)."""
        if cache is None:
            cache = (None, (None,) * len(self.down_blocks), None, None)
        in_cache, down_caches, mid_cache, out_cache = cache
        x, in_cache = self.conv_in.stream(x, in_cache)
        new_down_caches = []
        for block, block_cache in zip(self.down_blocks, down_caches):
            x, block_cache = block(x, block_cache)
            new_down_caches.append(block_cache)
        x, mid_cache = self.mid_block(x, mid_cache)
        x, out_cache = self.conv_out.stream(jax.nn.silu(self.norm_out(x)), out_cache)
        return x, (in_cache, tuple(new_down_caches), mid_cache, out_cache)
