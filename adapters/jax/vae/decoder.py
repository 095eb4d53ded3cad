"""The Wan VAE decoder: latent chunk [B, T', H', W', z_dim] -> [B, T, 8 H', 8 W', out_channels]."""

from __future__ import annotations

import jax
from flax import nnx

from wanjax.adapters.jax.vae.blocks import Cache, MidBlock, Upsample, residual_chain, run_blocks
from wanjax.adapters.jax.vae.layers import CausalConv3d, RMSNorm
from wanjax.adapters.jax.vae.residual import ResidualUpBlock
from wanjax.adapters.jax.vae.runtime import VaeRuntime
from wanjax.domain.specs import VaeSpec


class UpBlock(nnx.Module):
    """`num_res_blocks + 1` residual blocks, then an optional upsample (diffusers' WanUpBlock, Wan 2.1)."""

    def __init__(
        self,
        in_dim: int,
        out_dim: int,
        runtime: VaeRuntime,
        *,
        num_res_blocks: int,
        upsample: str | None,
        rngs: nnx.Rngs,
    ) -> None:
        self.resnets = residual_chain(in_dim, out_dim, num_res_blocks + 1, runtime, rngs=rngs)
        # The upsample halves the channel count; the next level's input is out_dim // 2.
        self.upsamplers = (
            nnx.List([Upsample(out_dim, out_dim // 2, runtime, temporal=upsample == "3d", rngs=rngs)])
            if upsample is not None
            else None
        )

    def __call__(self, x: jax.Array, cache: Cache) -> tuple[jax.Array, Cache]:
        res_caches, up_cache = (None, None) if cache is None else cache
        x, res_caches = run_blocks(self.resnets, x, res_caches)
        if self.upsamplers is not None:
            x, up_cache = self.upsamplers[0](x, up_cache)
        return x, (res_caches, up_cache)


def _up_block(
    spec: VaeSpec, level: int, in_dim: int, out_dim: int, runtime: VaeRuntime, rngs: nnx.Rngs
) -> nnx.Module:
    """Level `level` (0 = coarsest); temporal upsampling follows `temperal_downsample` reversed."""
    up = level != len(spec.dim_mult) - 1
    temporal = up and spec.temperal_downsample[::-1][level]
    if spec.is_residual:
        return ResidualUpBlock(
            in_dim, out_dim, runtime, num_res_blocks=spec.num_res_blocks, temporal=temporal, up=up, rngs=rngs
        )
    # Wan 2.1: every level after the first receives the previous upsample's halved channels.
    in_dim = in_dim // 2 if level > 0 else in_dim
    upsample = ("3d" if temporal else "2d") if up else None
    return UpBlock(in_dim, out_dim, runtime, num_res_blocks=spec.num_res_blocks, upsample=upsample, rngs=rngs)


class Decoder3d(nnx.Module):
    """Causal 3D decoder (diffusers' WanDecoder3d), the Wan 2.1 or the residual Wan 2.2 layout.

    Levels run from the coarsest, `decoder_dim` wide. Like diffusers, the decoder has
    no attention outside its middle block whatever `attn_scales` says.
    """

    def __init__(self, spec: VaeSpec, runtime: VaeRuntime, *, rngs: nnx.Rngs) -> None:
        dims = [spec.decoder_dim * m for m in (spec.dim_mult[-1], *spec.dim_mult[::-1])]
        self.conv_in = CausalConv3d(spec.z_dim, dims[0], (3, 3, 3), runtime, padding=(1, 1, 1), rngs=rngs)
        self.mid_block = MidBlock(dims[0], runtime, rngs=rngs)
        self.up_blocks = nnx.List(
            [_up_block(spec, level, i, o, runtime, rngs) for level, (i, o) in enumerate(zip(dims[:-1], dims[1:]))]
        )
        self.norm_out = RMSNorm(dims[-1], runtime, images=False)
        self.conv_out = CausalConv3d(
            dims[-1], spec.out_channels, (3, 3, 3), runtime, padding=(1, 1, 1), rngs=rngs
        )

    def __call__(self, x: jax.Array, cache: Cache) -> tuple[jax.Array, Cache]:
        """One chunk `x` [B, T', H', W', z_dim] and the previous chunk's cache (None first).

        The first chunk must be the first latent frame alone: it decodes to one frame,
        every later latent frame to `temporal_compression` frames.
        """
        in_cache, mid_cache, up_caches, out_cache = (None,) * 4 if cache is None else cache
        x, in_cache = self.conv_in.stream(x, in_cache)
        x, mid_cache = self.mid_block(x, mid_cache)
        x, up_caches = run_blocks(self.up_blocks, x, up_caches)
        x, out_cache = self.conv_out.stream(jax.nn.silu(self.norm_out(x)), out_cache)
        return x, (in_cache, mid_cache, up_caches, out_cache)
