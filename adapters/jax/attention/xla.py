"""Attention port of the JAX backend and its portable XLA implementation.

Layers receive an `AttentionFn` object at construction and call it with the static
description of each call (`AttentionCall`: kind, token grid, layer, mask structure); which
kernel runs (XLA, tokamax, Pallas, ring attention) is chosen by configuration when the
runtime is built, never by a string test inside a layer.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Protocol

import jax
import jax.numpy as jnp

from wanjax.domain.attention_call import FEATURES, AttentionCall, refuse_unless_honoured


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


def structure_mask(call: AttentionCall, queries: int, keys: int) -> jax.Array | None:
    """[1, 1, T, S] bool, True where a query sees a key under `call.structure` (None: no structure);
    keys past the grid's S (padding) are never seen."""
    if call.structure is None:
        return None
    query_index = jnp.arange(queries, dtype=jnp.int32)  # [T]
    visible = call.structure.visible_keys(query_index, call.grid)  # [T]
    return (jnp.arange(keys, dtype=jnp.int32)[None, :] < visible[:, None])[None, None]  # [1, 1, T, S]


class AttentionFn(Protocol):
    """Softmax attention scaled by 1/sqrt(H) as `call` describes it (every key, or those its
    structure lets each query see): q [B, T, N, H], k/v [B, S, N, H] -> [B, T, N, H]."""

    @property
    def key_alignment(self) -> int:
        """Keys are padded, and the padding masked out, to a multiple of this inside the call (1: never)."""
        ...

    def check(self, call: AttentionCall) -> None:
        """Raises ConfigError, naming this kernel, what of `call` it does not support and the fix;
        `__call__` checks first, so a refused call fails while tracing, before anything compiles."""
        ...

    def __call__(self, q: jax.Array, k: jax.Array, v: jax.Array, call: AttentionCall) -> jax.Array: ...


@dataclasses.dataclass(frozen=True)
class XlaAttention:
    """`jax.nn.dot_product_attention` lowered by plain XLA.

    Runs on every platform (CPU included) and is the reference the faster kernels are
    tested against. Logits and softmax are computed in fp32 whatever the input dtype,
    as torch's SDPA does for bf16 inputs. Keys are padded to a multiple of
    `key_alignment` and the padding masked out (see `key_alignment_for`). Honours every
    call: a structure becomes a [T, S] boolean mask beside the logits it already holds.
    """

    key_alignment: int = 1

    def check(self, call: AttentionCall) -> None:
        refuse_unless_honoured("attention=xla", frozenset(FEATURES), call, "")

    def __call__(self, q: jax.Array, k: jax.Array, v: jax.Array, call: AttentionCall) -> jax.Array:
        self.check(call)
        padded_keys = k.shape[1] + -k.shape[1] % self.key_alignment  # as attend_aligned pads them
        mask = structure_mask(call, q.shape[1], padded_keys)
        attend = functools.partial(jax.nn.dot_product_attention, mask=mask, implementation="xla")
        return attend_aligned(attend, q, k, v, self.key_alignment)  # [B, T, N, H]
