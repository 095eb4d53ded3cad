"""Attention port of the JAX backend and its portable XLA implementation.

Layers receive an `AttentionFn` object at construction and call it; which kernel runs
(XLA, tokamax, Pallas, ring attention) is chosen by configuration when the runtime is
built, never by a string test inside a layer.
"""

from __future__ import annotations

import dataclasses
from typing import Protocol

import jax


class AttentionFn(Protocol):
    """Unmasked softmax attention scaled by 1/sqrt(H): q [B, T, N, H], k/v [B, S, N, H] -> [B, T, N, H]."""

    def __call__(self, q: jax.Array, k: jax.Array, v: jax.Array) -> jax.Array: ...


@dataclasses.dataclass(frozen=True)
class XlaAttention:
    """`jax.nn.dot_product_attention` lowered by plain XLA.

    Runs on every platform (CPU included) and is the reference the faster kernels are
    tested against. Logits and softmax are computed in fp32 whatever the input dtype,
    as torch's SDPA does for bf16 inputs.
    """

    def __call__(self, q: jax.Array, k: jax.Array, v: jax.Array) -> jax.Array:
        return jax.nn.dot_product_attention(q, k, v, implementation="xla")  # [B, T, N, H]
