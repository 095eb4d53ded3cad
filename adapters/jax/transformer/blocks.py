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
from collections.abc import Callable, Mapping
from typing import NamedTuple

import jax
import jax.numpy as jnp
from flax import nnx
from jax import lax

from wanjax.adapters.jax.attention.xla import AttentionFn
from wanjax.adapters.jax.transformer.rope import RopeTables, apply_rope
from wanjax.adapters.jax.transformer.runtime import TransformerRuntime
from wanjax.domain.attention_call import AttentionCall
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


class CrossAttentionKV(NamedTuple):
    """What the cross-attention attends over: keys and values of the text tokens and, in
    Wan 2.1 I2V, of the image tokens (None otherwise). [B, L, N, H] / [B, M, N, H] for one
    block; with a leading [layers] axis for all blocks (the KV cache a sampling loop holds).
    A model's cache also holds the K/V of its extensions' own blocks, by extension name, in
    `extensions` (a VACE model's VACE blocks': {"vace": [V, B, L, N, H] ...}); None: none."""

    text_k: jax.Array
    text_v: jax.Array
    image_k: jax.Array | None = None
    image_v: jax.Array | None = None
    extensions: Mapping[str, CrossAttentionKV] | None = None


class Attention(nnx.Module):
    """Wan attention: q/k/v projections, RMS norm of q and k over all heads at once
    (diffusers' "rms_norm_across_heads", i.e. over the full inner dim before the head
    split), the attention kernel, and the output projection. As self-attention
    (`__call__`) it rotates q and k with RoPE; as cross-attention its keys and values
    come from `key_values`, so they can be computed once per prompt (`cross`). `kernel`
    is the attention it calls: the block picks the runtime's self-attention kernel for
    its self-attention and the plain one for its cross-attention.

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
        kernel: AttentionFn,
        image_kv: bool = False,
        rngs: nnx.Rngs,
    ):
        linear = functools.partial(
            nnx.Linear, dim, dim, dtype=runtime.dtype, param_dtype=runtime.param_dtype,
            dot_general=runtime.block_matmul, rngs=rngs,
        )  # fmt: skip
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
        self.attention = kernel

    def __call__(self, x: jax.Array, rope: RopeTables, call: AttentionCall) -> jax.Array:
        """Self-attention with RoPE on q and k, as `call` describes it: x [B, S, D] -> [B, S, D]."""
        q = apply_rope(self._queries(x), rope)  # [B, S, N, H]
        k = apply_rope(self._heads(self.norm_k(self.to_k(x)).astype(self.dtype)), rope)  # [B, S, N, H]
        v = self._heads(self.to_v(x))  # [B, S, N, H]
        out = self.attention(q, k, v, call)  # [B, S, N, H]
        return self.to_out(out.reshape(*out.shape[:2], -1))

    def key_values(self, context: jax.Array, image_context: jax.Array | None) -> CrossAttentionKV:
        """The cross-attention's keys and values: of the embedded text context [B, L, D] and,
        with `image_kv`, of the embedded image tokens [B, M, D]. They depend on the prompt
        and image only, so a sampling loop can compute them once (the KV cache)."""
        k = self._heads(self.norm_k(self.to_k(context)).astype(self.dtype))  # [B, L, N, H]
        v = self._heads(self.to_v(context))  # [B, L, N, H]
        if image_context is None:
            return CrossAttentionKV(k, v)
        k_img = self._heads(self.norm_added_k(self.add_k_proj(image_context)).astype(self.dtype))
        v_img = self._heads(self.add_v_proj(image_context))  # [B, M, N, H]
        return CrossAttentionKV(k, v, k_img, v_img)

    def cross(self, x: jax.Array, kv: CrossAttentionKV, call: AttentionCall) -> jax.Array:
        """Cross-attention of x [B, S, D] over `kv` (no RoPE), as `call` describes it -> [B, S, D]."""
        q = self._queries(x)  # [B, S, N, H]
        out = self.attention(q, kv.text_k, kv.text_v, call)  # [B, S, N, H]
        if kv.image_k is not None:
            out = out + self.attention(q, kv.image_k, kv.image_v, call)  # summed in the activation dtype, as diffusers
        return self.to_out(out.reshape(*out.shape[:2], -1))

    def _queries(self, x: jax.Array) -> jax.Array:
        """[B, S, D] -> q [B, S, N, H]."""
        return self._heads(self.norm_q(self.to_q(x)).astype(self.dtype))

    def _heads(self, x: jax.Array) -> jax.Array:
        """[B, S, D] -> [B, S, N, H]."""
        return x.reshape(*x.shape[:2], self.heads, -1)


class FeedForward(nnx.Module):
    """Linear -> GELU -> Linear (diffusers' FeedForward: "gelu-approximate" in the blocks,
    "gelu" (exact) in the I2V image embedder).

    The activation reads the first matmul's output [B, S, F], the largest tensor of a block. By
    default it is evaluated in fp32 and rounded once to the activation dtype (torch's opmath for a
    bf16 GELU, as the official code runs it): a pass of its own over that tensor. With
    `activation_in_epilogue` it is written on the matmul's output in its own dtype, the form XLA's
    GPU compiler fuses into cuBLASLt's BIAS_GELU epilogue (tanh GELU only), which evaluates
    bias and GELU in fp32 on the fp32 accumulator before its one rounding: the pass, a read and a
    write of [B, S, F], disappears, and the pre-activation is not rounded to bf16 first (the
    deviation docs/sampling.md names). Where XLA does not fuse it (CPU, TPU, a GPU's fp8 product,
    whose scales sit between GEMM and GELU), that form rounds each of the GELU's operations to the
    activation dtype: keep the default there.
    """

    def __init__(
        self,
        d_in: int,
        d_hidden: int,
        d_out: int,
        runtime: TransformerRuntime,
        *,
        activation: Callable[[jax.Array], jax.Array] = gelu_tanh,
        matmul: Callable[..., jax.Array] = lax.dot_general,
        activation_in_epilogue: bool = False,
        rngs: nnx.Rngs,
    ):
        linear = functools.partial(
            nnx.Linear, dtype=runtime.dtype, param_dtype=runtime.param_dtype, dot_general=matmul, rngs=rngs
        )
        self.proj_in = linear(d_in, d_hidden)
        self.proj_out = linear(d_hidden, d_out)
        self.activation = activation
        self.activation_in_epilogue = activation_in_epilogue

    def __call__(self, x: jax.Array) -> jax.Array:
        hidden = self.proj_in(x)  # [B, S, F]
        if self.activation_in_epilogue:
            return self.proj_out(self.activation(hidden))
        return self.proj_out(in_fp32(self.activation, hidden))


class WanBlock(nnx.Module):
    """One transformer block, modulated by the time embedding through its own fp32
    `scale_shift_table` [1, 6, D] (shift/scale/gate of the attention and of the FFN).

    The modulation is per sample (T = 1) or per token (T = S, Wan 2.2 TI2V's per-token
    timesteps); it broadcasts over the tokens either way."""

    def __init__(self, spec: TransformerSpec, runtime: TransformerRuntime, *, rngs: nnx.Rngs):
        dim, eps = spec.inner_dim, spec.eps
        self.norm1 = fp32_layer_norm(dim, eps, affine=False, rngs=rngs)
        self_kernel = runtime.attention if runtime.self_attention is None else runtime.self_attention
        self.attn1 = Attention(dim, spec.num_attention_heads, eps, runtime, kernel=self_kernel, rngs=rngs)
        self.norm2 = fp32_layer_norm(dim, eps, affine=True, rngs=rngs) if spec.cross_attn_norm else None
        self.attn2 = Attention(
            dim,
            spec.num_attention_heads,
            eps,
            runtime,
            kernel=runtime.attention,
            image_kv=spec.uses_image_embeddings,
            rngs=rngs,
        )
        self.norm3 = fp32_layer_norm(dim, eps, affine=False, rngs=rngs)
        self.ffn = FeedForward(
            dim, spec.ffn_dim, dim, runtime, matmul=runtime.block_matmul,
            activation_in_epilogue=runtime.activation_in_matmul_epilogue, rngs=rngs,
        )  # fmt: skip
        self.scale_shift_table = nnx.Param(
            jax.random.normal(rngs.params(), (1, 6, dim), jnp.float32) / dim**0.5
        )
        self.dtype = runtime.dtype

    def cross_key_values(self, context: jax.Array, image_context: jax.Array | None) -> CrossAttentionKV:
        """context [B, L, D] and image_context [B, M, D] (embedded) -> this block's cross-attention K/V."""
        return self.attn2.key_values(context, image_context)

    def __call__(
        self, x: jax.Array, kv: CrossAttentionKV, temb6: jax.Array, rope: RopeTables, attention: AttentionCall
    ) -> jax.Array:
        """x: [B, S, D], kv: this block's cross-attention K/V ([B, L, N, H] ...),
        temb6: [B, T, 6, D] with T = 1 or S -> [B, S, D] (activation dtype). `attention`
        describes its self-attention; its cross-attention's is `attention.as_cross()`."""
        modulation = self.scale_shift_table[...][None] + temb6.astype(jnp.float32)  # [B, T, 6, D] fp32
        shift, scale, gate, ff_shift, ff_scale, ff_gate = jnp.unstack(modulation, axis=2)  # [B, T, D] each

        h = (self.norm1(x) * (1 + scale) + shift).astype(self.dtype)
        x = (x.astype(jnp.float32) + self.attn1(h, rope, attention) * gate).astype(self.dtype)

        h = x if self.norm2 is None else self.norm2(x).astype(self.dtype)
        x = x + self.attn2.cross(h, kv, attention.as_cross())

        h = (self.norm3(x) * (1 + ff_scale) + ff_shift).astype(self.dtype)
        return (x.astype(jnp.float32) + self.ffn(h).astype(jnp.float32) * ff_gate).astype(self.dtype)
