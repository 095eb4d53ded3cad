"""The UMT5 encoder (Wan's umt5-xxl text encoder) as one JAX function over stacked weights.

The network of transformers' `UMT5EncoderModel` and of the official Wan `T5Encoder`: token
embedding; per block a pre-norm self-attention with no 1/sqrt(d) scaling and its own
relative-position bias table, then a pre-norm gated tanh-GELU feed-forward; a final norm.
Norms are T5's: x / rms(x) * weight, with no mean and no bias. The blocks run as one
`lax.scan` over weights stacked [layers, ...], so compile time does not grow with depth.

A ComfyUI scaled fp8 file's Linear kernels and token embedding (`original_t5.fp8_tensors`) stay
in fp8 on the device as `ScaledKernel`s, their values times their per-tensor scales; each is
dequantized where it is read, one layer's inside the scan, the embedding's gathered rows only. That
is the file's own dequantization, so a float32 encoder computes with exactly the dequantized weights.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import attrs
import jax
import jax.numpy as jnp
import numpy as np

from wanjax.adapters.checkpoints.original_t5 import fp8_tensors
from wanjax.adapters.jax.platform.scaled_kernel import ScaledKernel
from wanjax.domain.errors import CheckpointError

BLOCK_WEIGHTS = {  # ours: transformers' name inside encoder.block.{i}., and whether it is a Linear
    "attention_norm": ("layer.0.layer_norm.weight", False),
    "q": ("layer.0.SelfAttention.q.weight", True),
    "k": ("layer.0.SelfAttention.k.weight", True),
    "v": ("layer.0.SelfAttention.v.weight", True),
    "o": ("layer.0.SelfAttention.o.weight", True),
    "position_bias": ("layer.0.SelfAttention.relative_attention_bias.weight", False),
    "ffn_norm": ("layer.1.layer_norm.weight", False),
    "gate": ("layer.1.DenseReluDense.wi_0.weight", True),
    "up": ("layer.1.DenseReluDense.wi_1.weight", True),
    "down": ("layer.1.DenseReluDense.wo.weight", True),
}


@attrs.frozen(kw_only=True)
class Umt5Spec:
    """The encoder's shape and its relative-position bucketing (transformers' `UMT5Config` names)."""

    num_layers: int
    num_heads: int
    d_kv: int
    relative_attention_num_buckets: int = 32
    relative_attention_max_distance: int = 128
    layer_norm_epsilon: float = 1e-6

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> Umt5Spec:
        """From `UMT5Config` arguments (a folder's config.json, or `umt5_config` of a weights file)."""
        activation = config.get("dense_act_fn", "gelu_new")
        if config.get("feed_forward_proj", "gated-gelu") != "gated-gelu" or activation != "gelu_new":
            raise CheckpointError(
                f"this UMT5 encoder uses {config.get('feed_forward_proj')} / {activation}; the JAX encoder "
                "runs Wan's gated tanh-GELU only: use --set text_encoder_backend=torch"
            )
        fields = {field.name for field in attrs.fields(cls)}
        return cls(**{name: value for name, value in config.items() if name in fields})


def relative_buckets(length: int, spec: Umt5Spec) -> np.ndarray:
    """[length, length] bucket of each (query, key) pair: T5's bidirectional bucketing, in float32
    as transformers computes it (the bucket edges fall where float32 rounding decides them)."""
    position = np.arange(length)
    relative = position[None, :] - position[:, None]  # key - query
    half = spec.relative_attention_num_buckets // 2
    exact = half // 2
    distance = np.abs(relative)
    scale = np.float32(math.log(spec.relative_attention_max_distance / exact))
    far = np.maximum(distance, exact).astype(np.float32)  # the log is read only from `exact` on
    log_ratio = np.log(far / np.float32(exact)) / scale * np.float32(half - exact)
    large = np.minimum(exact + log_ratio.astype(np.int64), half - 1)  # truncation, as torch's .to(long)
    return (relative > 0) * half + np.where(distance < exact, distance, large)


def stack_weights(tensors: Mapping[str, np.ndarray], num_layers: int, dtype: Any) -> dict[str, Any]:
    """Our weights from transformers-named tensors: Linear kernels as [in, out], blocks stacked; those
    a scaled fp8 file keeps in fp8 (`fp8_tensors`) as `ScaledKernel`s read as `dtype`."""
    fp8 = fp8_tensors(tensors)

    def tensor(name: str) -> np.ndarray:
        if name not in tensors:
            raise CheckpointError(f"the UMT5 encoder has no tensor {name}")
        return np.asarray(tensors[name])

    def stored(names: list[str], linear: bool, stack: Any = np.stack) -> Any:  # stacked [layers, ...]
        turned = (lambda a: a.T) if linear else (lambda a: a)  # noqa: E731
        if names[0] not in fp8:
            return jnp.asarray(stack([turned(tensor(n)) for n in names]), dtype)
        values = stack([turned(tensors.packed(n)) for n in names])  # type: ignore[attr-defined]
        scales = stack([np.float32(tensors.scale(n)) for n in names])  # type: ignore[attr-defined]
        return ScaledKernel(jnp.asarray(values), jnp.asarray(scales, jnp.float32), dtype)

    blocks = {
        ours: stored([f"encoder.block.{i}.{name}" for i in range(num_layers)], linear)
        for ours, (name, linear) in BLOCK_WEIGHTS.items()
    }
    return {
        "embedding": stored(["shared.weight"], False, stack=lambda arrays: arrays[0]),
        "blocks": blocks,
        "final_norm": jnp.asarray(tensor("encoder.final_layer_norm.weight"), dtype),
    }


def _embedded(table: jax.Array | ScaledKernel, token_ids: jax.Array) -> jax.Array:
    """Rows `token_ids` of the embedding `table` [V, D]; of a scaled fp8 one, only those dequantized."""
    if not isinstance(table, ScaledKernel):
        return table[token_ids]
    return (jnp.asarray(table.values)[token_ids].astype(jnp.float32) * table.scale).astype(table.dtype)


def _norm(x: jax.Array, weight: jax.Array, eps: float) -> jax.Array:
    variance = jnp.mean(jnp.square(x.astype(jnp.float32)), axis=-1, keepdims=True)
    return weight * (x * jax.lax.rsqrt(variance + eps)).astype(weight.dtype)


def encode(weights: Mapping[str, Any], token_ids: jax.Array, mask: jax.Array, spec: Umt5Spec) -> jax.Array:
    """Token ids and attention mask [B, L] -> last hidden states [B, L, D], in the weights' dtype."""
    b, length = token_ids.shape
    heads, width = spec.num_heads, spec.d_kv
    buckets = jnp.asarray(relative_buckets(length, spec))  # [L, L]
    masked = jnp.where(mask[:, None, None, :] > 0, 0.0, jnp.finfo(jnp.float32).min)  # [B, 1, 1, L]
    eps = spec.layer_norm_epsilon

    def block(x: jax.Array, w: Mapping[str, jax.Array]) -> tuple[jax.Array, None]:
        h = _norm(x, w["attention_norm"], eps)
        # w[name][...]: a kernel as an array, a `ScaledKernel` dequantized (one layer's, here)
        q, k, v = ((h @ w[name][...]).reshape(b, length, heads, width) for name in ("q", "k", "v"))
        bias = jnp.transpose(w["position_bias"][buckets], (2, 0, 1))[None]  # [1, N, L, L]
        logits = jnp.einsum("bqnh,bknh->bnqk", q, k, preferred_element_type=jnp.float32)
        probs = jax.nn.softmax(logits + bias.astype(jnp.float32) + masked, axis=-1).astype(v.dtype)
        attended = jnp.einsum("bnqk,bknh->bqnh", probs, v).reshape(b, length, heads * width)
        x = x + attended @ w["o"][...]
        h = _norm(x, w["ffn_norm"], eps)
        gate = jax.nn.gelu(h @ w["gate"][...], approximate=True)
        return x + (gate * (h @ w["up"][...])) @ w["down"][...], None

    x = _embedded(weights["embedding"], token_ids)
    x, _ = jax.lax.scan(block, x, weights["blocks"])
    return _norm(x, weights["final_norm"], eps)
