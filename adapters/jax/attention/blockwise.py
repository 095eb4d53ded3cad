"""Blockwise (online-softmax) attention in plain XLA: the `AttentionFn` port with memory
bounded by the block sizes, not by the sequence lengths.

`jax.nn.dot_product_attention(implementation="xla")` materialises the whole [B, N, T, S]
logit matrix: about 100 GiB of fp32 logits for Wan 2.1 1.3B at 832x480x81 with guidance.
Here the queries are cut into blocks of `block_q` rows (a sequential `lax.map`) and each
query block sweeps the keys `block_k` at a time (a `lax.scan`), keeping the online-softmax
state (running max, running sum, unnormalised output) in fp32. At most one
[B, N, block_q, block_k] logit block is alive at a time, so memory is linear in T and S.

The same folding step serves ring attention (adapters/jax/attention/context_parallel.py): it keeps one
`SoftmaxState` for its queries and folds every key block that travels the ring into it.

A call's structure (`AttentionCall.structure`: frame-block-causal) lets each query see a prefix
of the keys; the fold masks the keys past it and skips (`lax.cond`) every key block that no
query of its query block sees, so a block-causal call computes the logits of the key blocks its
queries can see, not all of them.

Everything works heads-first ([B, N, L, H]), the layout of the batched matmuls; the public
entry points say which layout they take.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from wanjax.domain.attention_call import FEATURES, AttentionCall, refuse_unless_honoured

# A finite "minus infinity" for masked keys: a row whose keys of one block are all masked
# then computes exp(MASK - MASK) = 1 instead of exp(-inf - -inf) = nan, and the first real
# key block rescales that bogus mass by exp(MASK - real max) = 0.
MASK_VALUE = -0.7 * float(np.finfo(np.float32).max)


# The two products of a block as `lax.dot_general` takes them, heads-first: [B, N] batch axes,
# logits contracting q's and k's H, the output contracting p's S with v's.
LOGITS_DIMENSIONS = (((3,), (3,)), ((0, 1), (0, 1)))
VALUES_DIMENSIONS = (((3,), (2,)), ((0, 1), (0, 1)))


def _as_given(k: jax.Array) -> jax.Array:
    return k


@dataclasses.dataclass(frozen=True)
class BlockArithmetic:
    """How the kernel computes: the two matrix products of each block, each with `lax.dot_general`'s
    signature, q k^T (`logits`) and p v (`values`), and what the keys [B, S, N, H] become before any
    block (`keys`: softmax ignores a shift every key shares). The operands' dtype and the keys as
    given by default; the SageAttention-style kernel's (adapters/jax/attention/sage.py) scale the
    products' operands into int8 and fp8 and smooth the keys."""

    logits: Callable[..., jax.Array] = lax.dot_general
    values: Callable[..., jax.Array] = lax.dot_general
    keys: Callable[[jax.Array], jax.Array] = _as_given


class SoftmaxState(NamedTuple):
    """Online softmax over the keys folded in so far, all fp32, heads-first."""

    peak: jax.Array  # running max of the logits [B, N, T]
    total: jax.Array  # running sum of exp(logit - peak) [B, N, T]
    acc: jax.Array  # unnormalised output, sum of exp(logit - peak) * v [B, N, T, H]


def heads_first(x: jax.Array) -> jax.Array:
    """[B, L, N, H] <-> [B, N, L, H] (its own inverse)."""
    return jnp.swapaxes(x, 1, 2)


def empty_state(q: jax.Array) -> SoftmaxState:
    """The state of queries q [B, N, T, H] before any key: max -inf, sum and output 0.

    Made with `*_like` from q, so that inside `shard_map` it varies over the mesh axes q
    varies over, as a loop carry updated from q must."""
    per_query = q[..., 0]  # [B, N, T]
    return SoftmaxState(
        jnp.full_like(per_query, -jnp.inf, jnp.float32),
        jnp.zeros_like(per_query, jnp.float32),
        jnp.zeros_like(q, jnp.float32),
    )


def normalised(state: SoftmaxState, dtype: jnp.dtype) -> jax.Array:
    """The attention output [B, T, N, H] in `dtype` from a state that has seen every key."""
    return heads_first(state.acc / state.total[..., None]).astype(dtype)


def fold_keys(
    q: jax.Array,
    k: jax.Array,
    v: jax.Array,
    state: SoftmaxState,
    *,
    block_q: int,
    block_k: int,
    kv_lengths: jax.Array | None = None,
    visible: Callable[[jax.Array], jax.Array] | None = None,
    query_offset: jax.Array | int = 0,
    key_offset: jax.Array | int = 0,
    arithmetic: BlockArithmetic = BlockArithmetic(),
) -> SoftmaxState:
    """`state` of queries q [B, N, T, H] updated with the keys/values k, v [B, N, S, H].

    Queries go `block_q` rows at a time, keys `block_k` at a time; a sequence no longer than
    its block is one block, unpadded. `kv_lengths` [B]: only the first kv_lengths[b] keys of
    row b count (key padding), as `jax.nn.dot_product_attention`'s `key_value_seq_lengths`.
    `visible`: global query indices [bq] int32 -> how many keys, in global order, each sees (a
    prefix that never shrinks as the index grows: a structure's `visible_keys`); None: all.
    The queries here are global indices `query_offset`.., the keys `key_offset`.. (a ring's shards).
    `arithmetic`: the two matrix products of each block (its `keys` are the caller's to apply).
    """
    t, s = q.shape[2], k.shape[2]
    block_q, block_k = min(block_q, t), min(block_k, s)
    k, v = (_pad_axis(x, 2, block_k) for x in (k, v))
    limit = None
    if kv_lengths is not None or k.shape[2] > s:
        limit = jnp.full((q.shape[0],), s, jnp.int32)
        if kv_lengths is not None:
            limit = jnp.minimum(limit, kv_lengths.astype(jnp.int32))

    def sweep(q_block: jax.Array, state_block: SoftmaxState, q_start: jax.Array | int) -> SoftmaxState:
        key_end = None
        if visible is not None:
            query_index = query_offset + q_start + jnp.arange(q_block.shape[2], dtype=jnp.int32)  # [bq]
            key_end = visible(query_index) - key_offset  # [bq], in this k's indices
        return _sweep_keys(q_block, k, v, state_block, block_k, limit, key_end, arithmetic)

    if t == block_q:
        return sweep(q, state, 0)
    # Query blocks on a leading axis for lax.map: [B, N, T', ...] -> [T' / bq, B, N, bq, ...].
    q = _pad_axis(q, 2, block_q)
    state = SoftmaxState(*(_pad_axis(x, 2, block_q) for x in state))
    to_blocks = lambda x: jnp.moveaxis(x.reshape(*x.shape[:2], -1, block_q, *x.shape[3:]), 2, 0)
    from_blocks = lambda x: jnp.moveaxis(x, 0, 2).reshape(*x.shape[1:3], -1, *x.shape[4:])[:, :, :t]
    q_starts = jnp.arange(q.shape[2] // block_q, dtype=jnp.int32) * block_q
    blocks = lax.map(lambda args: sweep(*args), (to_blocks(q), SoftmaxState(*map(to_blocks, state)), q_starts))
    return SoftmaxState(*map(from_blocks, blocks))


def _pad_axis(x: jax.Array, axis: int, multiple: int) -> jax.Array:
    """x zero-padded along `axis` to a multiple of `multiple` (no copy when it already is)."""
    extra = -x.shape[axis] % multiple
    if not extra:
        return x
    widths = [(0, 0)] * x.ndim
    widths[axis] = (0, extra)
    return jnp.pad(x, widths)


def _sweep_keys(
    q: jax.Array,
    k: jax.Array,
    v: jax.Array,
    state: SoftmaxState,
    block_k: int,
    limit: jax.Array | None,
    key_end: jax.Array | None,
    arithmetic: BlockArithmetic,
) -> SoftmaxState:
    """One query block q [B, N, bq, H] over every key block of k/v [B, N, S', H] (S' a multiple of
    `block_k`); keys at or past limit[b] are masked out (None: all count), and for query i those
    at or past key_end[i] (None: all count); a key block past every query's end is skipped."""
    num_blocks = k.shape[2] // block_k
    fold = functools.partial(_fold_block, q, limit=limit, key_end=key_end, arithmetic=arithmetic)
    if key_end is not None:
        fold = _skipping_unseen(fold, key_end.max())
    if num_blocks == 1:
        return fold(k, v, state, 0)
    to_blocks = lambda x: jnp.moveaxis(x.reshape(*x.shape[:2], num_blocks, block_k, x.shape[3]), 2, 0)
    starts = jnp.arange(num_blocks, dtype=jnp.int32) * block_k

    def step(state: SoftmaxState, block: tuple[jax.Array, jax.Array, jax.Array]) -> tuple[SoftmaxState, None]:
        k_block, v_block, start = block
        return fold(k_block, v_block, state, start), None

    return lax.scan(step, state, (to_blocks(k), to_blocks(v), starts))[0]


def _skipping_unseen(fold: Callable[..., SoftmaxState], seen_end: jax.Array) -> Callable[..., SoftmaxState]:
    """`fold(k, v, state, start)` run only where the key block starting at `start` holds a key
    before `seen_end` (some query sees it); the state as it was elsewhere."""

    def folded_if_seen(k: jax.Array, v: jax.Array, state: SoftmaxState, start: jax.Array | int) -> SoftmaxState:
        return lax.cond(start < seen_end, lambda state: fold(k, v, state, start), lambda state: state, state)

    return folded_if_seen


def _fold_block(
    q: jax.Array,
    k: jax.Array,
    v: jax.Array,
    state: SoftmaxState,
    start: jax.Array | int,
    *,
    limit: jax.Array | None,
    key_end: jax.Array | None,
    arithmetic: BlockArithmetic,
) -> SoftmaxState:
    """`state` updated with one key block k/v [B, N, bk, H] whose first key has index `start`;
    keys at or past limit[b] (per row) or key_end[i] (per query) are masked out.

    Logits and probabilities are fp32; probabilities are cast to v's dtype for the PV matmul,
    as `jax.nn.dot_product_attention` does; the two products are `arithmetic`'s. The old sum and
    output are rescaled by exp(old max - new max), so every term ends up relative to the global max.
    """
    logits = arithmetic.logits(q, k, LOGITS_DIMENSIONS, preferred_element_type=jnp.float32)  # "bnth,bnsh->bnts"
    logits = logits * q.shape[-1] ** -0.5  # [B, N, bq, bk]
    key_index = start + jnp.arange(k.shape[2], dtype=jnp.int32)  # [bk]
    if limit is not None:
        valid = key_index[None, :] < limit[:, None]  # [B, bk]
        logits = jnp.where(valid[:, None, None, :], logits, MASK_VALUE)
    if key_end is not None:
        seen = key_index[None, :] < key_end[:, None]  # [bq, bk]
        logits = jnp.where(seen, logits, MASK_VALUE)
    peak = jnp.maximum(state.peak, logits.max(axis=-1))  # [B, N, bq]
    p = jnp.exp(logits - peak[..., None])
    rescale = jnp.exp(state.peak - peak)  # [B, N, bq]
    p_cast = p.astype(v.dtype)
    pv = arithmetic.values(p_cast, v, VALUES_DIMENSIONS, preferred_element_type=jnp.float32)  # "bnts,bnsh->bnth"
    return SoftmaxState(peak, rescale * state.total + p.sum(axis=-1), rescale[..., None] * state.acc + pv)


@dataclasses.dataclass(frozen=True)
class BlockwiseAttention:
    """Online-softmax attention in plain XLA (`AttentionFn`), on every platform; the `auto`
    backend on CPU. Equal to `XlaAttention` up to the order of the fp32 sums (~1e-6).
    Honours every call (a structure as described in the module docstring).

    `block_q` x `block_k` fp32 logits per (row, head) are alive at once: 2 x 12 x 1024 x 512
    x 4 B = 50 MB for Wan 1.3B with guidance, whatever the video size. Never pads keys
    (`key_alignment` 1): the last key block is masked inside. `arithmetic` is how it computes
    (bf16's products by default; `attention=blockwise_sage`'s in int8 and fp8: attention/sage.py).
    """

    block_q: int = 1024
    block_k: int = 512
    arithmetic: BlockArithmetic = BlockArithmetic()

    @property
    def key_alignment(self) -> int:
        """Keys are never padded to a tile here."""
        return 1

    def check(self, call: AttentionCall) -> None:
        refuse_unless_honoured("attention=blockwise", frozenset(FEATURES), call, "")

    def __call__(
        self,
        q: jax.Array,
        k: jax.Array,
        v: jax.Array,
        call: AttentionCall,
        key_value_seq_lengths: jax.Array | None = None,
    ) -> jax.Array:
        """q [B, T, N, H], k/v [B, S, N, H] -> [B, T, N, H]; `key_value_seq_lengths` [B] masks
        each row's keys past its length."""
        self.check(call)
        q, k, v = map(heads_first, (q, self.arithmetic.keys(k), v))
        state = fold_keys(
            q,
            k,
            v,
            empty_state(q),
            block_q=self.block_q,
            block_k=self.block_k,
            kv_lengths=key_value_seq_lengths,
            visible=visible_keys(call),
            arithmetic=self.arithmetic,
        )
        return normalised(state, q.dtype)


def visible_keys(call: AttentionCall) -> Callable[[jax.Array], jax.Array] | None:
    """`fold_keys`' `visible` for `call`: its structure's prefix rule on its grid (None: no structure)."""
    if call.structure is None:
        return None
    return functools.partial(call.structure.visible_keys, grid=call.grid)
