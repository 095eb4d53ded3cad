"""Embeddings of the Wan transformer: latent patches -> tokens, and the condition embeddings
(diffusers' WanTimeTextImageEmbedding): timesteps -> time embedding and the blocks' 6-way
modulation, text tokens and (Wan 2.1 I2V) CLIP image tokens -> model width.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import jax
import jax.numpy as jnp
from flax import nnx
from jax.typing import DTypeLike

from wanjax.adapters.jax.transformer.blocks import FeedForward, fp32_layer_norm, gelu_exact, gelu_tanh, in_fp32
from wanjax.adapters.jax.transformer.runtime import TransformerRuntime
from wanjax.domain.specs import TransformerSpec

IMAGE_NORM_EPS = 1e-5
"""diffusers builds the image embedder's FP32LayerNorms with torch's default eps, not the spec's."""


class PatchEmbed(nnx.Module):
    """Non-overlapping 3D patches of `in_channels`-wide latents -> tokens: diffusers'
    Conv3d(kernel = stride = patch), done as a reshape and one contraction. The kernel
    keeps the conv's channels-last layout [pt, ph, pw, C, D]. `patch_size`: the spec's unless
    given (S2V's frame packer embeds at 2x and 4x the patch)."""

    def __init__(
        self,
        spec: TransformerSpec,
        runtime: TransformerRuntime,
        in_channels: int,
        *,
        patch_size: tuple[int, int, int] | None = None,
        rngs: nnx.Rngs,
    ):
        self.patch_size = spec.patch_size if patch_size is None else patch_size
        shape = (*self.patch_size, in_channels, spec.inner_dim)
        init = nnx.initializers.lecun_normal(in_axis=(0, 1, 2, 3), out_axis=4)
        self.kernel = nnx.Param(init(rngs.params(), shape, runtime.param_dtype))
        self.bias = nnx.Param(jnp.zeros((spec.inner_dim,), runtime.param_dtype))
        self.dtype = runtime.dtype

    def __call__(self, latents: jax.Array) -> jax.Array:
        """[B, F, H, W, C] -> [B, F', H', W', D]."""
        b, f, h, w, c = latents.shape
        pt, ph, pw = self.patch_size
        patches = latents.reshape(b, f // pt, pt, h // ph, ph, w // pw, pw, c).astype(self.dtype)
        kernel = self.kernel[...].astype(self.dtype)
        out = jnp.einsum("bftyhxwc,thwcd->bfyxd", patches, kernel)
        return out + self.bias[...].astype(self.dtype)


def timestep_sinusoid(timestep: jax.Array, dim: int, max_period: float = 10000.0) -> jax.Array:
    """[...] -> [..., dim] fp32: cos then sin halves (diffusers' Timesteps with
    flip_sin_to_cos=True, downscale_freq_shift=0), zero-padded when dim is odd."""
    half = dim // 2
    freqs = jnp.exp(-math.log(max_period) * jnp.arange(half, dtype=jnp.float32) / half)  # [dim/2]
    angles = timestep.astype(jnp.float32)[..., None] * freqs  # [..., dim/2]
    emb = jnp.concatenate([jnp.cos(angles), jnp.sin(angles)], axis=-1)
    return jnp.pad(emb, [(0, 0)] * (emb.ndim - 1) + [(0, dim % 2)])


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


class ImageEmbedder(nnx.Module):
    """CLIP image tokens -> model width (diffusers' WanImageEmbedding): fp32 LayerNorm,
    exact-GELU MLP, fp32 LayerNorm. FLF2V first adds a learnt position embedding over
    the first and last frames' tokens, which arrive concatenated as one sequence."""

    def __init__(self, spec: TransformerSpec, runtime: TransformerRuntime, *, rngs: nnx.Rngs):
        image_dim, dim = spec.image_dim, spec.inner_dim
        self.pos_embed = (
            nnx.Param(jnp.zeros((1, spec.pos_embed_seq_len, image_dim), runtime.param_dtype))
            if spec.pos_embed_seq_len is not None
            else None
        )
        self.norm1 = fp32_layer_norm(image_dim, IMAGE_NORM_EPS, affine=True, rngs=rngs)
        self.ff = FeedForward(image_dim, image_dim, dim, runtime, activation=gelu_exact, rngs=rngs)
        self.norm2 = fp32_layer_norm(dim, IMAGE_NORM_EPS, affine=True, rngs=rngs)
        self.dtype = runtime.dtype

    def __call__(self, image_context: jax.Array) -> jax.Array:
        """[B, M, image_dim] -> [B, M, D] (activation dtype)."""
        x = image_context.astype(self.dtype)
        if self.pos_embed is not None:
            x = x + self.pos_embed[...].astype(self.dtype)
        x = self.ff(self.norm1(x).astype(self.dtype))
        return self.norm2(x).astype(self.dtype)


class ConditionEmbedder(nnx.Module):
    """Timesteps -> time embedding and its 6-way block modulation; text and image tokens -> model width.

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
        self.image_embedder = ImageEmbedder(spec, runtime, rngs=rngs) if spec.uses_image_embeddings else None
        self.freq_dim = spec.freq_dim
        self.dtype = runtime.dtype

    def time(self, timestep: jax.Array) -> tuple[jax.Array, jax.Array]:
        """timestep [B], or [B, S] one per token -> temb [B, T, D] and the block modulation
        temb6 [B, T, 6, D] (activation dtype), with T = 1 or S."""
        per_token = timestep if timestep.ndim == 2 else timestep[:, None]  # [B, T]
        temb = self.time_embedder(timestep_sinusoid(per_token, self.freq_dim)).astype(self.dtype)
        temb6 = self.time_proj(in_fp32(jax.nn.silu, temb))  # [B, T, 6 * D]
        return temb, temb6.reshape(*temb6.shape[:2], 6, -1)

    def text(self, context: jax.Array) -> jax.Array:
        """[B, L, text_dim] -> [B, L, D]."""
        return self.text_embedder(context)

    def image(self, image_context: jax.Array) -> jax.Array:
        """[B, M, image_dim] -> [B, M, D]; only for specs that use image embeddings."""
        return self.image_embedder(image_context)
