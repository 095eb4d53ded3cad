"""The Wan 2.1 VAE decoder: latent chunk [B, T', H', W', z_dim] -> video [B, T, H, W, 3]."""

from __future__ import annotations

import jax
from flax import nnx

from wanjax.adapters.jax.vae.blocks import Cache, MidBlock, ResidualBlock, Upsample
from wanjax.adapters.jax.vae.layers import CausalConv3d, RMSNorm
from wanjax.adapters.jax.vae.runtime import VaeRuntime
from wanjax.domain.specs import VaeSpec


class UpBlock(nnx.Module):
    """`num_res_blocks + 1` residual blocks, then an optional upsample (diffusers' WanUpBlock)."""

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
        dims = [in_dim] + [out_dim] * (num_res_blocks + 1)
        self.resnets = nnx.List(
            [ResidualBlock(i, o, runtime, rngs=rngs) for i, o in zip(dims[:-1], dims[1:])]
        )
        # The upsample halves the channel count; the next level's input is out_dim // 2.
        self.upsamplers = (
            nnx.List([Upsample(out_dim, out_dim // 2, runtime, temporal=upsample == "3d", rngs=rngs)])
            if upsample is not None
            else None
        )

    def __call__(self, x: jax.Array, cache: Cache) -> tuple[jax.Array, Cache]:
        res_caches, up_cache = ((None,) * len(self.resnets), None) if cache is None else cache
        new_res_caches = []
        for resnet, res_cache in zip(self.resnets, res_caches):
            x, res_cache = resnet(x, res_cache)
            new_res_caches.append(res_cache)
        if self.upsamplers is not None:
            x, up_cache = self.upsamplers[0](x, up_cache)
        return x, (tuple(new_res_caches), up_cache)


class Decoder3d(nnx.Module):
    """Causal 3D decoder (diffusers' WanDecoder3d, non-residual Wan 2.1 layout).

    Levels run from the coarsest; temporal upsampling follows `temperal_downsample`
    reversed. Like diffusers, the decoder has no attention outside its middle block
    whatever `attn_scales` says.
    """

    def __init__(self, spec: VaeSpec, runtime: VaeRuntime, *, rngs: nnx.Rngs) -> None:
        dims = [spec.base_dim * m for m in (spec.dim_mult[-1], *spec.dim_mult[::-1])]
        temporal_upsample = spec.temperal_downsample[::-1]
        self.conv_in = CausalConv3d(spec.z_dim, dims[0], (3, 3, 3), runtime, padding=(1, 1, 1), rngs=rngs)
        self.mid_block = MidBlock(dims[0], runtime, rngs=rngs)
        blocks = []
        last_level = len(spec.dim_mult) - 1
        for level, (in_dim, out_dim) in enumerate(zip(dims[:-1], dims[1:])):
            upsample = None
            if level != last_level:
                upsample = "3d" if temporal_upsample[level] else "2d"
            in_dim = in_dim // 2 if level > 0 else in_dim
            blocks.append(
                UpBlock(
                    in_dim, out_dim, runtime, num_res_blocks=spec.num_res_blocks, upsample=upsample, rngs=rngs
                )
            )
        self.up_blocks = nnx.List(blocks)
        self.norm_out = RMSNorm(dims[-1], runtime, images=False)
        self.conv_out = CausalConv3d(dims[-1], 3, (3, 3, 3), runtime, padding=(1, 1, 1), rngs=rngs)

    def __call__(self, x: jax.Array, cache: Cache) -> tuple[jax.Array, Cache]:
        """One chunk `x` [B, T', H', W', z_dim] and the previous chunk's cache (None first).

        The first chunk must be the first latent frame alone: it decodes to one frame,
        every later latent frame to `temporal_compression` frames.
        """
        if cache is None:
            cache = (None, None, (None,) * len(self.up_blocks), None)
        in_cache, mid_cache, up_caches, out_cache = cache
        x, in_cache = self.conv_in.stream(x, in_cache)
        x, mid_cache = self.mid_block(x, mid_cache)
        new_up_caches = []
        for block, block_cache in zip(self.up_blocks, up_caches):
            x, block_cache = block(x, block_cache)
            new_up_caches.append(block_cache)
        x, out_cache = self.conv_out.stream(jax.nn.silu(self.norm_out(x)), out_cache)
        return x, (in_cache, mid_cache, tuple(new_up_caches), out_cache)
