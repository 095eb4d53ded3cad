"""The Wan VAE encoder: chunk [B, T, H, W, in_channels] -> moments [B, T', H/8, W/8, 2 * z_dim]."""

from __future__ import annotations

import jax
from flax import nnx

from wanjax.adapters.jax.vae.blocks import Cache, Downsample, MidBlock, ResidualBlock, run_blocks
from wanjax.adapters.jax.vae.layers import CausalConv3d, RMSNorm
from wanjax.adapters.jax.vae.residual import ResidualDownBlock
from wanjax.adapters.jax.vae.runtime import VaeRuntime
from wanjax.domain.specs import VaeSpec


def _flat_down_blocks(spec: VaeSpec, dims: list[int], runtime: VaeRuntime, rngs: nnx.Rngs) -> list[nnx.Module]:
    """Wan 2.1: per level, `num_res_blocks` residual blocks, then a downsample except at the last."""
    blocks: list[nnx.Module] = []
    last_level = len(spec.dim_mult) - 1
    for level, (in_dim, out_dim) in enumerate(zip(dims[:-1], dims[1:])):
        for _ in range(spec.num_res_blocks):
            blocks.append(ResidualBlock(in_dim, out_dim, runtime, rngs=rngs))
            in_dim = out_dim
        if level != last_level:
            blocks.append(Downsample(out_dim, runtime, temporal=spec.temperal_downsample[level], rngs=rngs))
    return blocks


def _residual_down_blocks(
    spec: VaeSpec, dims: list[int], runtime: VaeRuntime, rngs: nnx.Rngs
) -> list[nnx.Module]:
    """Wan 2.2: one residual down block per level; the last neither downsamples nor folds."""
    last_level = len(spec.dim_mult) - 1
    return [
        ResidualDownBlock(
            in_dim, out_dim, runtime, num_res_blocks=spec.num_res_blocks,
            temporal=level != last_level and spec.temperal_downsample[level], down=level != last_level, rngs=rngs,
        )  # fmt: skip
        for level, (in_dim, out_dim) in enumerate(zip(dims[:-1], dims[1:]))
    ]


class Encoder3d(nnx.Module):
    """Causal 3D encoder (diffusers' WanEncoder3d), the Wan 2.1 or the residual Wan 2.2 layout.

    `down_blocks` is one list as in diffusers: flat residual blocks and downsamples
    (2.1) or one `ResidualDownBlock` per level (2.2). Input channels are RGB, or RGB
    folded by the patch (`spec.in_channels`).
    """

    def __init__(self, spec: VaeSpec, runtime: VaeRuntime, *, rngs: nnx.Rngs) -> None:
        dims = [spec.base_dim * m for m in (1, *spec.dim_mult)]
        self.conv_in = CausalConv3d(spec.in_channels, dims[0], (3, 3, 3), runtime, padding=(1, 1, 1), rngs=rngs)
        build = _residual_down_blocks if spec.is_residual else _flat_down_blocks
        self.down_blocks = nnx.List(build(spec, dims, runtime, rngs))
        self.mid_block = MidBlock(dims[-1], runtime, rngs=rngs)
        self.norm_out = RMSNorm(dims[-1], runtime, images=False)
        self.conv_out = CausalConv3d(
            dims[-1], 2 * spec.z_dim, (3, 3, 3), runtime, padding=(1, 1, 1), rngs=rngs
        )

    def __call__(self, x: jax.Array, cache: Cache) -> tuple[jax.Array, Cache]:
        """One chunk `x` [B, T, H, W, Cin] and the previous chunk's cache (None first)."""
        in_cache, down_caches, mid_cache, out_cache = (None,) * 4 if cache is None else cache
        x, in_cache = self.conv_in.stream(x, in_cache)
        x, down_caches = run_blocks(self.down_blocks, x, down_caches)
        x, mid_cache = self.mid_block(x, mid_cache)
        x, out_cache = self.conv_out.stream(jax.nn.silu(self.norm_out(x)), out_cache)
        return x, (in_cache, down_caches, mid_cache, out_cache)
