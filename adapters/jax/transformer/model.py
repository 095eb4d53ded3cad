"""The Wan 2.1 text-to-video transformer in Flax NNX, numerically equal to diffusers'
WanTransformer3DModel.

Latents are channels-last, [B, F, H, W, C], as everywhere in wanjax. A (pt, ph, pw)
patch becomes one token; tokens run in (frame, row, column) order, the order of
diffusers' `flatten(2)` after its Conv3d.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import jax
import jax.numpy as jnp
from flax import nnx
from jax.typing import DTypeLike

from wanjax.adapters.jax.transformer.blocks import WanBlock, fp32_layer_norm, gelu_tanh, in_fp32
from wanjax.adapters.jax.transformer.rope import RopeTables, rope_tables
from wanjax.adapters.jax.transformer.runtime import TransformerRuntime
from wanjax.domain.specs import TransformerSpec


def timestep_sinusoid(timestep: jax.Array, dim: int, max_period: float = 10000.0) -> jax.Array:
    """[B] -> [B, dim] fp32: cos then sin halves (diffusers' Timesteps with
    flip_sin_to_cos=True, downscale_freq_shift=0), zero-padded when dim is odd."""
    half = dim // 2
    freqs = jnp.exp(-math.log(max_period) * jnp.arange(half, dtype=jnp.float32) / half)  # [dim/2]
    angles = timestep.astype(jnp.float32)[:, None] * freqs[None, :]  # [B, dim/2]
    emb = jnp.concatenate([jnp.cos(angles), jnp.sin(angles)], axis=-1)
    return jnp.pad(emb, ((0, 0), (0, dim % 2)))


class PatchEmbed(nnx.Module):
    """Non-overlapping 3D patches -> tokens: diffusers' Conv3d(kernel = stride = patch),
    done as a reshape and one contraction. The kernel keeps the conv's channels-last
    layout [pt, ph, pw, C, D]."""

    def __init__(self, spec: TransformerSpec, runtime: TransformerRuntime, *, rngs: nnx.Rngs):
        shape = (*spec.patch_size, spec.in_channels, spec.inner_dim)
        init = nnx.initializers.lecun_normal(in_axis=(0, 1, 2, 3), out_axis=4)
        self.kernel = nnx.Param(init(rngs.params(), shape, runtime.param_dtype))
        self.bias = nnx.Param(jnp.zeros((spec.inner_dim,), runtime.param_dtype))
        self.patch_size = spec.patch_size
        self.dtype = runtime.dtype

    def __call__(self, latents: jax.Array) -> jax.Array:
        """[B, F, H, W, C] -> [B, F', H', W', D]."""
        b, f, h, w, c = latents.shape
        pt, ph, pw = self.patch_size
        patches = latents.reshape(b, f // pt, pt, h // ph, ph, w // pw, pw, c).astype(self.dtype)
        kernel = self.kernel[...].astype(self.dtype)
        out = jnp.einsum("bftyhxwc,thwcd->bfyxd", patches, kernel)
        return out + self.bias[...].astype(self.dtype)


class Mlp(nnx.Module):
    """linear_1 -> activation -> linear_2 (diffusers' TimestepEmbedding, PixArtAlphaTextProjection)."""

    def __init__(
        self,
        d_in: int,
        d_out: int,
        activation: Callable[[jax.Array], jax.Array],
        *,
        dtype: DTypeLike,
        param_dtype: DTypeLike,
        rngs: nnx.Rngs,
    ):
        self.linear_1 = nnx.Linear(d_in, d_out, dtype=dtype, param_dtype=param_dtype, rngs=rngs)
        self.linear_2 = nnx.Linear(d_out, d_out, dtype=dtype, param_dtype=param_dtype, rngs=rngs)
        self.activation = activation

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.linear_2(in_fp32(self.activation, self.linear_1(x)))


class ConditionEmbedder(nnx.Module):
    """Timestep -> time embedding and its 6-way block modulation; text tokens -> model width.

    The time embedder is fp32 (diffusers keeps it in fp32); its output is then cast to
    the activation dtype before the SiLU and `time_proj`, as diffusers' `type_as` does.
    """

    def __init__(self, spec: TransformerSpec, runtime: TransformerRuntime, *, rngs: nnx.Rngs):
        dim = spec.inner_dim
        self.time_embedder = Mlp(
            spec.freq_dim, dim, jax.nn.silu, dtype=jnp.float32, param_dtype=jnp.float32, rngs=rngs
        )
        self.time_proj = nnx.Linear(
            dim, 6 * dim, dtype=runtime.dtype, param_dtype=runtime.param_dtype, rngs=rngs
        )
        self.text_embedder = Mlp(
            spec.text_dim, dim, gelu_tanh, dtype=runtime.dtype, param_dtype=runtime.param_dtype, rngs=rngs
        )
        self.freq_dim = spec.freq_dim
        self.dtype = runtime.dtype

    def time(self, timestep: jax.Array) -> tuple[jax.Array, jax.Array]:
        """[B] -> temb [B, D] and the block modulation temb6 [B, 6, D] (activation dtype)."""
        temb = self.time_embedder(timestep_sinusoid(timestep, self.freq_dim)).astype(self.dtype)
        temb6 = self.time_proj(in_fp32(jax.nn.silu, temb))  # [B, 6 * D]
        return temb, temb6.reshape(temb6.shape[0], 6, -1)

    def text(self, context: jax.Array) -> jax.Array:
        """[B, L, text_dim] -> [B, L, D]."""
        return self.text_embedder(context)


def _stacked_blocks(spec: TransformerSpec, runtime: TransformerRuntime, *, rngs: nnx.Rngs) -> WanBlock:
    """All blocks as one module whose parameters have a leading "layers" axis [L, ...]."""

    @nnx.split_rngs(splits=spec.num_layers)
    @nnx.vmap(in_axes=(0,), out_axes=0, transform_metadata={nnx.PARTITION_NAME: "layers"})
    def build(rngs: nnx.Rngs) -> WanBlock:
        return WanBlock(spec, runtime, rngs=rngs)

    return build(rngs)


def _unstacked(blocks: WanBlock, num_layers: int) -> nnx.List:
    """The stacked blocks sliced into a list of independent blocks.

    Slicing rather than building L blocks one by one gives both layouts the same
    initial values, and keeps `nnx.eval_shape` linear in L: in flax 0.12 every Rngs
    draw under a trace walks the whole trace so far (a 14B model took ~30 s to trace).
    The blocks carry no sharding metadata yet; once they do, slicing must also drop
    the "layers" axis name from it.
    """
    graphdef, state = nnx.split(blocks)
    layers = (jax.tree.map(lambda a, i=i: a[i], state) for i in range(num_layers))
    return nnx.List([nnx.merge(graphdef, layer) for layer in layers])


class WanTransformer(nnx.Module):
    """Velocity prediction of the Wan 2.1 T2V transformer (diffusers' WanTransformer3DModel)."""

    def __init__(self, spec: TransformerSpec, runtime: TransformerRuntime, *, rngs: nnx.Rngs):
        dim = spec.inner_dim
        self.patch_embedding = PatchEmbed(spec, runtime, rngs=rngs)
        self.condition_embedder = ConditionEmbedder(spec, runtime, rngs=rngs)
        blocks = _stacked_blocks(spec, runtime, rngs=rngs)
        self.blocks = blocks if runtime.scan_layers else _unstacked(blocks, spec.num_layers)
        self.norm_out = fp32_layer_norm(dim, spec.eps, affine=False, rngs=rngs)
        self.proj_out = nnx.Linear(
            dim,
            spec.out_channels * math.prod(spec.patch_size),
            dtype=runtime.dtype,
            param_dtype=runtime.param_dtype,
            rngs=rngs,
        )
        self.scale_shift_table = nnx.Param(
            jax.random.normal(rngs.params(), (1, 2, dim), jnp.float32) / dim**0.5
        )
        self.spec = spec
        self.scan_layers = runtime.scan_layers
        self.dtype = runtime.dtype

    def token_grid(self, latent_shape: tuple[int, ...]) -> tuple[int, int, int]:
        """(F', H', W') token grid of latents [B, F, H, W, C]; checks the shape fits the spec."""
        if len(latent_shape) != 5 or latent_shape[-1] != self.spec.in_channels:
            raise ValueError(
                f"latents must be [B, F, H, W, C={self.spec.in_channels}], got shape {tuple(latent_shape)}"
            )
        f, h, w = latent_shape[1:4]
        if any(n % p for n, p in zip((f, h, w), self.spec.patch_size, strict=True)):
            raise ValueError(
                f"latent (F, H, W)={(f, h, w)} is not divisible by patch_size={self.spec.patch_size}"
            )
        return f // self.spec.patch_size[0], h // self.spec.patch_size[1], w // self.spec.patch_size[2]

    def rope_tables(self, latent_shape: tuple[int, ...]) -> RopeTables:
        """RoPE tables for latents of this shape: a per-shape invariant to hoist out of a sampling loop."""
        grid = self.token_grid(latent_shape)
        return rope_tables(self.spec.attention_head_dim, grid, self.spec.rope_max_seq_len)

    def __call__(
        self, latents: jax.Array, timestep: jax.Array, context: jax.Array, *, rope: RopeTables | None = None
    ) -> jax.Array:
        """latents [B, F, H, W, C_in], timestep [B] (e.g. 999.0), context [B, L, text_dim]
        -> velocity [B, F, H, W, C_out] float32. `rope` defaults to `self.rope_tables(latents.shape)`."""
        b = latents.shape[0]
        grid = self.token_grid(latents.shape)
        rope = self.rope_tables(latents.shape) if rope is None else rope

        x = self.patch_embedding(latents).reshape(b, math.prod(grid), -1)  # [B, S, D]
        temb, temb6 = self.condition_embedder.time(timestep)  # [B, D], [B, 6, D]
        context = self.condition_embedder.text(context)  # [B, L, D]
        x = self._run_blocks(x, context, temb6, rope)

        modulation = self.scale_shift_table[...] + temb[:, None, :].astype(jnp.float32)  # [B, 2, D]
        shift, scale = jnp.unstack(modulation[:, :, None, :], axis=1)  # [B, 1, D] each
        x = (self.norm_out(x) * (1 + scale) + shift).astype(self.dtype)
        x = self.proj_out(x)  # [B, S, pt * ph * pw * C_out]
        return self._unpatchify(x, grid).astype(jnp.float32)

    def _run_blocks(self, x: jax.Array, context: jax.Array, temb6: jax.Array, rope: RopeTables) -> jax.Array:
        if self.scan_layers:

            @nnx.scan(in_axes=(nnx.Carry, 0, None, None, None), out_axes=nnx.Carry)
            def step(x: jax.Array, block: WanBlock, context, temb6, rope) -> jax.Array:
                return block(x, context, temb6, rope)

            return step(x, self.blocks, context, temb6, rope)
        for block in self.blocks:
            x = block(x, context, temb6, rope)
        return x

    def _unpatchify(self, x: jax.Array, grid: tuple[int, int, int]) -> jax.Array:
        """[B, S, pt * ph * pw * C] (channels fastest, as diffusers' proj_out) -> [B, F, H, W, C]."""
        (f, h, w), (pt, ph, pw) = grid, self.spec.patch_size
        x = x.reshape(x.shape[0], f, h, w, pt, ph, pw, -1)
        x = x.transpose(0, 1, 4, 2, 5, 3, 6, 7)  # [B, F', pt, H', ph, W', pw, C]
        return x.reshape(x.shape[0], f * pt, h * ph, w * pw, -1)
