"""Attention port of the JAX backend and its portable XLA implementation.

Layers receive an `AttentionFn` object at construction and call it; which kernel runs
(XLA, tokamax, Pallas, ring attention) is chosen by configuration when the runtime is
built, never by a string test inside a layer.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Protocol

import jax
import jax.numpy as jnp


def key_alignment_for(platform: str) -> int:
    """The key-length multiple worth padding to on `platform` (1: none): 257 CLIP image
    tokens become 384 on TPU, whose matrix units take 128-row tiles."""
    return 128 if platform == "tpu" else 1


def pad_keys(k: jax.Array, v: jax.Array, multiple: int) -> tuple[jax.Array, jax.Array]:
    """k/v [B, S, N, H] -> [B, S', N, H] with S' the next multiple of `multiple`, zero-filled.

    The caller masks keys at index >= S out of the softmax.
    """
    widths = ((0, 0), (0, -k.shape[1] % multiple), (0, 0), (0, 0))
    return jnp.pad(k, widths), jnp.pad(v, widths)


def attend_aligned(
    attend: Callable[..., jax.Array], q: jax.Array, k: jax.Array, v: jax.Array, alignment: int
) -> jax.Array:
    """`attend(q, k, v)` with keys padded to a multiple of `alignment`, the padding masked
    out through `key_value_seq_lengths` (the `jax.nn.dot_product_attention` signature)."""
    kv_len = k.shape[1]
    if kv_len % alignment == 0:
        return attend(q, k, v)  # [B, T, N, H]
    k, v = pad_keys(k, v, alignment)  # [B, S', N, H]
    lengths = jnp.full((q.shape[0],), kv_len, jnp.int32)  # [B]
    return attend(q, k, v, key_value_seq_lengths=lengths)


class AttentionFn(Protocol):
    """Unmasked softmax attention scaled by 1/sqrt(H): q [B, T, N, H], k/v [B, S, N, H] -> [B, T, N, H]."""

    @property
    def key_alignment(self) -> int:
        """Keys are padded, and the padding masked out, to a multiple of this inside the call (1: never)."""
        ...

    def __call__(self, q: jax.Array, k: jax.Array, v: jax.Array) -> jax.Array: ...


@dataclasses.dataclass(frozen=True)
class XlaAttention:
    """`jax.nn.dot_product_attention` lowered by plain XLA.

    Runs on every platform (CPU included) and is the reference the faster kernels are
    tested against. Logits and softmax are computed in fp32 whatever the input dtype,
    as torch's SDPA does for bf16 inputs. Keys are padded to a multiple of
    `key_alignment` and the padding masked out (see `key_alignment_for`).
    """

    key_alignment: int = 1

    def __call__(self, q: jax.Array, k: jax.Array, v: jax.Array) -> jax.Array:
        attend = functools.partial(jax.nn.dot_product_attention, implementation="xla")
        return attend_aligned(attend, q, k, v, self.key_alignment)  # [B, T, N, H]
