"""Residual, middle and resampling blocks of the Wan VAE (2.1 and 2.2), channels last.

Every block maps one temporal chunk and its cache (None on the first chunk) to the
chunk's output and the next cache: `(x [B, T, H, W, C], cache) -> (y, cache)`.
Caches are pytrees of arrays whose shapes do not change after the first chunk.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from wanjax.adapters.jax.vae.layers import AttentionBlock, CausalConv3d, Conv2d, RMSNorm
from wanjax.adapters.jax.vae.runtime import VaeRuntime

Cache = Any
"""A block's temporal state: a pytree of [B, t, H, W, C] arrays, or None before the first chunk."""


def _per_frame(layer: nnx.Module, x: jax.Array) -> jax.Array:
    """Applies a 2D layer to every frame: [B, T, H, W, C] -> [B, T, H', W', C']."""
    b, t = x.shape[:2]
    y = layer(x.reshape(b * t, *x.shape[2:]))
    return y.reshape(b, t, *y.shape[1:])


def run_blocks(blocks: nnx.List, x: jax.Array, caches: Cache) -> tuple[jax.Array, tuple[Cache, ...]]:
    """Runs `blocks` in order, each with its own cache (`caches` None on the first chunk)."""
    caches = (None,) * len(blocks) if caches is None else caches
    new_caches = []
    for block, cache in zip(blocks, caches):
        x, cache = block(x, cache)
        new_caches.append(cache)
    return x, tuple(new_caches)


class ResidualBlock(nnx.Module):
    """(RMSNorm, SiLU, causal 3x3x3 conv) twice, plus a 1x1x1 shortcut when channels change.

    Dropout is 0 in every Wan checkpoint and inference ignores it, so there is none.
    """

    def __init__(self, in_dim: int, out_dim: int, runtime: VaeRuntime, *, rngs: nnx.Rngs) -> None:
        self.norm1 = RMSNorm(in_dim, runtime, images=False)
        self.conv1 = CausalConv3d(in_dim, out_dim, (3, 3, 3), runtime, padding=(1, 1, 1), rngs=rngs)
        self.norm2 = RMSNorm(out_dim, runtime, images=False)
        self.conv2 = CausalConv3d(out_dim, out_dim, (3, 3, 3), runtime, padding=(1, 1, 1), rngs=rngs)
        self.conv_shortcut = (
            CausalConv3d(in_dim, out_dim, (1, 1, 1), runtime, rngs=rngs) if in_dim != out_dim else None
        )

    def __call__(self, x: jax.Array, cache: Cache) -> tuple[jax.Array, Cache]:
        cache1, cache2 = (None, None) if cache is None else cache
        shortcut = x if self.conv_shortcut is None else self.conv_shortcut(x)
        x, cache1 = self.conv1.stream(jax.nn.silu(self.norm1(x)), cache1)
        x, cache2 = self.conv2.stream(jax.nn.silu(self.norm2(x)), cache2)
        return x + shortcut, (cache1, cache2)


class MidBlock(nnx.Module):
    """Residual block, per-frame attention, residual block (diffusers' WanMidBlock, one layer)."""

    def __init__(self, dim: int, runtime: VaeRuntime, *, rngs: nnx.Rngs) -> None:
        self.resnets = nnx.List([ResidualBlock(dim, dim, runtime, rngs=rngs) for _ in range(2)])
        self.attentions = nnx.List([AttentionBlock(dim, runtime, rngs=rngs)])

    def __call__(self, x: jax.Array, cache: Cache) -> tuple[jax.Array, Cache]:
        cache0, cache1 = (None, None) if cache is None else cache
        x, cache0 = self.resnets[0](x, cache0)
        x = self.attentions[0](x)
        x, cache1 = self.resnets[1](x, cache1)
        return x, (cache0, cache1)


class Upsample(nnx.Module):
    """Doubles H and W (nearest, then a 3x3 conv to `out_dim`); with `temporal`, also T.

    Temporal upsampling (a causal (3, 1, 1) conv to 2 * dim channels, read as two
    frames) skips the first chunk, so the first latent frame yields a single frame;
    diffusers marks that with its "Rep" cache entry. The 3x3 conv is `resample.1` in
    diffusers' names; in the `frames` convolution form (CPU) it runs on the input as four 2x2
    convolutions, one per output phase (`Conv2d.upsampled`), instead of on the upsampled copy.
    """

    def __init__(
        self, dim: int, out_dim: int, runtime: VaeRuntime, *, temporal: bool, rngs: nnx.Rngs
    ) -> None:
        self.resample = Conv2d(dim, out_dim, 3, runtime, padding=((1, 1), (1, 1)), rngs=rngs)
        self.time_conv = (
            CausalConv3d(dim, 2 * dim, (3, 1, 1), runtime, padding=(1, 0, 0), rngs=rngs) if temporal else None
        )

    def __call__(self, x: jax.Array, cache: Cache) -> tuple[jax.Array, Cache]:
        if self.time_conv is not None:
            b, t, h, w, c = x.shape  # [B, T, H, W, C]
            if cache is None:
                cache = jnp.zeros((b, self.time_conv.context_frames, h, w, c), x.dtype)
            else:
                pairs, cache = self.time_conv.stream(x, cache)  # [B, T, H, W, 2C]
                # Channels [0, C) are the earlier frame of each pair, [C, 2C) the later one.
                pairs = pairs.reshape(b, t, h, w, 2, c).transpose(0, 1, 4, 2, 3, 5)
                x = pairs.reshape(b, 2 * t, h, w, c)
        if self.resample.runtime.convolution == "frames":  # the CPU form: fewer multiply-adds, no 4x copy
            return _per_frame(self.resample.upsampled, x), cache
        # Nearest-neighbour x2 ("nearest-exact" in torch) is a plain repeat, exact in any dtype.
        x = jnp.repeat(jnp.repeat(x, 2, axis=2), 2, axis=3)
        return _per_frame(self.resample, x), cache


class Downsample(nnx.Module):
    """Halves H and W (pad right/bottom by 1, 3x3 conv with stride 2); with `temporal`, also T.

    Temporal downsampling is a (3, 1, 1) conv with stride 2 over the previous chunk's
    last frame followed by this chunk; the first chunk passes through unchanged.
    """

    def __init__(self, dim: int, runtime: VaeRuntime, *, temporal: bool, rngs: nnx.Rngs) -> None:
        self.resample = Conv2d(dim, dim, 3, runtime, stride=2, padding=((0, 1), (0, 1)), rngs=rngs)
        self.time_conv = (
            CausalConv3d(dim, dim, (3, 1, 1), runtime, stride=(2, 1, 1), rngs=rngs) if temporal else None
        )

    def __call__(self, x: jax.Array, cache: Cache) -> tuple[jax.Array, Cache]:
        x = _per_frame(self.resample, x)  # [B, T, H/2, W/2, C]
        if self.time_conv is None:
            return x, None
        last = x[:, -1:]
        if cache is not None:
            x = self.time_conv(jnp.concatenate([cache.astype(x.dtype), x], axis=1))
        return x, last


def residual_chain(in_dim: int, out_dim: int, count: int, runtime: VaeRuntime, *, rngs: nnx.Rngs) -> nnx.List:
    """`count` residual blocks: the first maps in_dim -> out_dim, the rest keep out_dim."""
    dims = [in_dim] + [out_dim] * count
    return nnx.List([ResidualBlock(i, o, runtime, rngs=rngs) for i, o in zip(dims[:-1], dims[1:])])
