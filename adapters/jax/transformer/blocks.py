"""The Wan transformer block: modulated self-attention with 3D RoPE, cross-attention to
the text tokens (and, in Wan 2.1 I2V, to the CLIP image tokens), and a modulated GELU
feed-forward network.

Numerics follow diffusers' WanTransformerBlock: the residual stream is updated in fp32
and cast back to the activation dtype after each sub-layer, every LayerNorm runs in
fp32 (diffusers' FP32LayerNorm), the q/k RMS norms reduce in fp32, and the modulation
tables are fp32 parameters.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp
from flax import nnx

from wanjax.adapters.jax.transformer.rope import RopeTables, apply_rope
from wanjax.adapters.jax.transformer.runtime import TransformerRuntime
from wanjax.domain.specs import TransformerSpec


def in_fp32(fn: Callable[[jax.Array], jax.Array], x: jax.Array) -> jax.Array:
    """Applies an elementwise activation in fp32 and casts back.

    torch evaluates GELU/SiLU of bf16 tensors in fp32 internally and rounds once; plain
    XLA would evaluate the polynomial/tanh in bf16, so we upcast explicitly.
    """
    return fn(x.astype(jnp.float32)).astype(x.dtype)


def gelu_tanh(x: jax.Array) -> jax.Array:
    """GELU, tanh approximation: torch's `GELU(approximate="tanh")` (same formula)."""
    return jax.nn.gelu(x, approximate=True)


def gelu_exact(x: jax.Array) -> jax.Array:
    """GELU with erf: torch's default `GELU(approximate="none")`; jax.nn.gelu defaults to tanh."""
    return jax.nn.gelu(x, approximate=False)


def fp32_layer_norm(dim: int, eps: float, *, affine: bool, rngs: nnx.Rngs) -> nnx.LayerNorm:
    """diffusers' FP32LayerNorm: statistics, normalisation and affine all in fp32.

    The two-pass variance (`use_fast_variance=False`) matches torch's layer_norm;
    flax's default E[x^2] - E[x]^2 loses precision when |mean| >> std.
    """
    return nnx.LayerNorm(
        dim,
        epsilon=eps,
        use_scale=affine,
        use_bias=affine,
        use_fast_variance=False,
        dtype=jnp.float32,
        param_dtype=jnp.float32,
        rngs=rngs,
    )


class Attention(nnx.Module):
    """Wan attention: q/k/v projections, RMS norm of q and k over all heads at once
    (diffusers' "rms_norm_across_heads", i.e. over the full inner dim before the head
    split), optional RoPE, the attention kernel, and the output projection.

    diffusers creates norm_q/norm_k for every Wan checkpoint whatever `qk_norm` says, so
    they are always present here too.

    With `image_kv=True` (Wan 2.1 I2V cross-attention) it also owns `add_k_proj`,
    `add_v_proj` and `norm_added_k`: the queries attend separately over the embedded
    image tokens, and the two attention outputs are summed before `to_out`.
    """

    def __init__(
        self,
        dim: int,
        heads: int,
        eps: float,
        runtime: TransformerRuntime,
        *,
        image_kv: bool = False,
        rngs: nnx.Rngs,
    ):
        linear = functools.partial(
            nnx.Linear, dim, dim, dtype=runtime.dtype, param_dtype=runtime.param_dtype, rngs=rngs
        )
        self.to_q, self.to_k, self.to_v, self.to_out = linear(), linear(), linear(), linear()
        # torch.nn.RMSNorm: x * rsqrt(mean(x^2) + eps) * weight; reduced here in fp32.
        rms = functools.partial(
            nnx.RMSNorm, dim, epsilon=eps, dtype=jnp.float32, param_dtype=runtime.param_dtype, rngs=rngs
        )
        self.norm_q, self.norm_k = rms(), rms()
        self.add_k_proj = linear() if image_kv else None
        self.add_v_proj = linear() if image_kv else None
        self.norm_added_k = rms() if image_kv else None
        self.heads = heads
        self.dtype = runtime.dtype
        self.attention = runtime.attention

    def __call__(
        self,
        x: jax.Array,
        context: jax.Array,
        rope: RopeTables | None,
        image_context: jax.Array | None = None,
    ) -> jax.Array:
        """x: [B, T, D] queries' source; context: [B, S, D] keys'/values' source;
        image_context: [B, M, D] embedded image tokens (image_kv only) -> [B, T, D]."""
        q = self._heads(self.norm_q(self.to_q(x)).astype(self.dtype))  # [B, T, N, H]
        k = self._heads(self.norm_k(self.to_k(context)).astype(self.dtype))  # [B, S, N, H]
        v = self._heads(self.to_v(context))  # [B, S, N, H]
        if rope is not None:
            q, k = apply_rope(q, rope), apply_rope(k, rope)
        out = self.attention(q, k, v)  # [B, T, N, H]
        if image_context is not None:
            k_img = self._heads(self.norm_added_k(self.add_k_proj(image_context)).astype(self.dtype))
            v_img = self._heads(self.add_v_proj(image_context))  # [B, M, N, H]
            out = out + self.attention(q, k_img, v_img)  # summed in the activation dtype, as diffusers
        return self.to_out(out.reshape(*out.shape[:2], -1))

    def _heads(self, x: jax.Array) -> jax.Array:
        """[B, S, D] -> [B, S, N, H]."""
        return x.reshape(*x.shape[:2], self.heads, -1)


class FeedForward(nnx.Module):
    """Linear -> GELU -> Linear (diffusers' FeedForward: "gelu-approximate" in the blocks,
    "gelu" (exact) in the I2V image embedder)."""

    def __init__(
        self,
        d_in: int,
        d_hidden: int,
        d_out: int,
        runtime: TransformerRuntime,
        *,
        activation: Callable[[jax.Array], jax.Array] = gelu_tanh,
        rngs: nnx.Rngs,
    ):
        linear = functools.partial(
            nnx.Linear, dtype=runtime.dtype, param_dtype=runtime.param_dtype, rngs=rngs
        )
        self.proj_in = linear(d_in, d_hidden)
        self.proj_out = linear(d_hidden, d_out)
        self.activation = activation

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.proj_out(in_fp32(self.activation, self.proj_in(x)))


class WanBlock(nnx.Module):
    """One transformer block, modulated by the time embedding through its own fp32
    `scale_shift_table` [1, 6, D] (shift/scale/gate of the attention and of the FFN).

    The modulation is per sample (T = 1) or per token (T = S, Wan 2.2 TI2V's per-token
    timesteps); it broadcasts over the tokens either way."""

    def __init__(self, spec: TransformerSpec, runtime: TransformerRuntime, *, rngs: nnx.Rngs):
        dim, eps = spec.inner_dim, spec.eps
        self.norm1 = fp32_layer_norm(dim, eps, affine=False, rngs=rngs)
        self.attn1 = Attention(dim, spec.num_attention_heads, eps, runtime, rngs=rngs)
        self.norm2 = fp32_layer_norm(dim, eps, affine=True, rngs=rngs) if spec.cross_attn_norm else None
        self.attn2 = Attention(
            dim, spec.num_attention_heads, eps, runtime, image_kv=spec.uses_image_embeddings, rngs=rngs
        )
        self.norm3 = fp32_layer_norm(dim, eps, affine=False, rngs=rngs)
        self.ffn = FeedForward(dim, spec.ffn_dim, dim, runtime, rngs=rngs)
        self.scale_shift_table = nnx.Param(
            jax.random.normal(rngs.params(), (1, 6, dim), jnp.float32) / dim**0.5
        )
        self.dtype = runtime.dtype

    def __call__(
        self,
        x: jax.Array,
        context: jax.Array,
        image_context: jax.Array | None,
        temb6: jax.Array,
        rope: RopeTables,
    ) -> jax.Array:
        """x: [B, S, D], context: [B, L, D], image_context: [B, M, D] or None,
        temb6: [B, T, 6, D] with T = 1 or S -> [B, S, D] (activation dtype)."""
        modulation = self.scale_shift_table[...][None] + temb6.astype(jnp.float32)  # [B, T, 6, D] fp32
        shift, scale, gate, ff_shift, ff_scale, ff_gate = jnp.unstack(modulation, axis=2)  # [B, T, D] each

        h = (self.norm1(x) * (1 + scale) + shift).astype(self.dtype)
        x = (x.astype(jnp.float32) + self.attn1(h, h, rope) * gate).astype(self.dtype)

        h = x if self.norm2 is None else self.norm2(x).astype(self.dtype)
        x = x + self.attn2(h, context, None, image_context)

        h = (self.norm3(x) * (1 + ff_scale) + ff_shift).astype(self.dtype)
        return (x.astype(jnp.float32) + self.ffn(h).astype(jnp.float32) * ff_gate).astype(self.dtype)
