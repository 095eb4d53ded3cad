"""Flash attention written with Pallas: the `AttentionFn` port without an [T, S] logits matrix.

Queries are cut into blocks of `block_q` rows and keys/values into blocks of `block_k`;
each query block sweeps the key blocks keeping the online-softmax state (running max
`m`, running sum `l`, unnormalised output `acc`) in fp32, so memory is linear in the
sequence length. Both sequences are padded to block multiples; padded keys get a
logit of -0.7 * float32 max (finite, so a row never computes inf - inf) and padded
query rows are sliced off.

Two sweeps share one update step:
- in-kernel loop (GPU, lowered through Triton; CPU interpret mode): one kernel
  instance per query block loops over the key blocks, loading each from the [S, H]
  key ref in global memory. GPU grid cells run in parallel, so the sweep cannot be a
  grid axis there.
- key grid axis (TPU): the key blocks are the last, sequential ("arbitrary") grid
  axis and the state lives in VMEM scratch, so VMEM holds one key block at a time
  however long the sequence.

The two products of each block are an `arithmetic` (the blockwise kernel's `BlockArithmetic`):
bf16's by default, int8 q k^T and e4m3 p v for `attention=pallas_sage` (attention/sage.py), whose
quantization runs inside the kernel, block by block, as the blockwise kernel's does.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
from jax.experimental.pallas import triton as pltriton

from wanjax.adapters.jax.attention.blockwise import BlockArithmetic
from wanjax.adapters.jax.attention.xla import pad_keys
from wanjax.domain.attention_call import CROSS, HONOURS_BLOCK_CAUSAL, SELF, AttentionCall, refuse_unless_honoured

MASK_VALUE = -0.7 * float(np.finfo(np.float32).max)

Update = Callable[..., tuple[jax.Array, jax.Array, jax.Array]]
"""`_update` with its key padding and arithmetic bound: (q, k, v, key_start, state) -> state."""


@dataclasses.dataclass(frozen=True)
class PallasAttention:
    """Pallas flash attention (`AttentionFn`); softmax scale 1/sqrt(H), no mask.

    `block_q`, `block_k`: rows per query/key block; powers of two >= 16 for Triton,
    multiples of 128 on TPU to fill its matrix units. `interpret`: run the Pallas
    interpreter (None: only on CPU, where no compiled Pallas backend exists).
    `keys_on_grid`: sweep the key blocks as a grid axis (None: on TPU only). Each sweep
    compiles only on its own platform (grid: TPU, loop: GPU); both interpret anywhere.
    `arithmetic`: the two products of each block, and what the keys become first (the
    blockwise kernel's hook). `setting`: the config value that chose it, as a refusal names it.
    Refuses a call with a structure (no masks but key padding in the kernel yet).
    """

    block_q: int = 128
    block_k: int = 128
    interpret: bool | None = None
    keys_on_grid: bool | None = None
    arithmetic: BlockArithmetic = BlockArithmetic()
    setting: str = "attention=pallas"

    @property
    def key_alignment(self) -> int:
        """Keys are padded (and masked) to a multiple of this inside the kernel call."""
        return self.block_k

    def check(self, call: AttentionCall) -> None:
        refuse_unless_honoured(self.setting, frozenset((SELF, CROSS)), call, f"choose {HONOURS_BLOCK_CAUSAL}")

    def __call__(self, q: jax.Array, k: jax.Array, v: jax.Array, call: AttentionCall) -> jax.Array:
        self.check(call)
        platform = jax.default_backend()
        interpret = platform == "cpu" if self.interpret is None else self.interpret
        keys_on_grid = platform == "tpu" if self.keys_on_grid is None else self.keys_on_grid
        t, s = q.shape[1], k.shape[1]
        k = self.arithmetic.keys(k)  # before the padding, as the blockwise kernel does
        q = jnp.pad(q, ((0, 0), (0, -t % self.block_q), (0, 0), (0, 0)))  # [B, T', N, H]
        k, v = pad_keys(k, v, self.block_k)  # [B, S', N, H]
        to_heads_first = functools.partial(jnp.swapaxes, axis1=1, axis2=2)  # [B, N, L, H]
        sweep = _grid_sweep if keys_on_grid else _loop_sweep
        kv_len = s if k.shape[1] > s else None
        update = functools.partial(_update, kv_len=kv_len, arithmetic=self.arithmetic)
        heads_first = map(to_heads_first, (q, k, v))
        out = sweep(*heads_first, self.block_q, self.block_k, update, interpret)  # [B, N, T', H]
        return to_heads_first(out)[:, :t]  # [B, T, N, H]


def _update(
    q: jax.Array,
    k: jax.Array,
    v: jax.Array,
    key_start: jax.Array,
    state: tuple,
    *,
    kv_len: int | None,
    arithmetic: BlockArithmetic,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """One online-softmax step of a query block over one key block.

    q [bq, H], k/v [bk, H]; state = (m [bq, 1], l [bq, 1], acc [bq, H]), all fp32.
    Keys at or past `kv_len` are padding and masked out (None: there is no padding).
    Logits and probabilities are fp32; probabilities are cast to v's dtype for the PV
    matmul, as `jax.nn.dot_product_attention` does; the two products are `arithmetic`'s.
    """
    m, l, acc = state
    scale = q.shape[-1] ** -0.5
    logits = arithmetic.logits(q, k, (((1,), (1,)), ((), ())), preferred_element_type=jnp.float32)
    logits = logits * scale  # [bq, bk]
    if kv_len is not None:
        key_index = key_start + jax.lax.broadcasted_iota(jnp.int32, logits.shape, 1)
        logits = jnp.where(key_index < kv_len, logits, MASK_VALUE)
    m_new = jnp.maximum(m, logits.max(axis=-1, keepdims=True))  # [bq, 1]
    p = jnp.exp(logits - m_new)  # [bq, bk]
    correction = jnp.exp(m - m_new)  # [bq, 1]
    l_new = correction * l + p.sum(axis=-1, keepdims=True)
    pv = arithmetic.values(p.astype(v.dtype), v, (((1,), (0,)), ((), ())), preferred_element_type=jnp.float32)
    return m_new, l_new, correction * acc + pv


def _initial_state(block_q: int, head_dim: int) -> tuple[jax.Array, jax.Array, jax.Array]:
    return (
        jnp.full((block_q, 1), -jnp.inf, jnp.float32),
        jnp.zeros((block_q, 1), jnp.float32),
        jnp.zeros((block_q, head_dim), jnp.float32),
    )


def _loop_sweep(
    q: jax.Array, k: jax.Array, v: jax.Array, block_q: int, block_k: int, update: Update, interpret: bool
) -> jax.Array:
    """q [B, N, T', H], k/v [B, N, S', H] -> [B, N, T', H]; grid (B, N, query blocks)."""
    b, n, t, h = q.shape
    s = k.shape[2]

    def kernel(q_ref, k_ref, v_ref, o_ref):
        q_block = q_ref[...]  # [bq, H]

        def step(j: jax.Array, state: tuple) -> tuple:
            start = pl.multiple_of(j * block_k, block_k)
            keys = pl.ds(start, block_k)
            return update(q_block, k_ref[keys, :], v_ref[keys, :], start, state)

        _, l, acc = jax.lax.fori_loop(0, s // block_k, step, _initial_state(block_q, h))
        o_ref[...] = (acc / l).astype(o_ref.dtype)

    q_spec = pl.BlockSpec((None, None, block_q, h), lambda bi, ni, qi: (bi, ni, qi, 0))
    kv_spec = pl.BlockSpec((None, None, s, h), lambda bi, ni, qi: (bi, ni, 0, 0))
    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype),
        grid=(b, n, t // block_q),
        in_specs=[q_spec, kv_spec, kv_spec],
        out_specs=q_spec,
        compiler_params=pltriton.CompilerParams(num_warps=4 if h <= 64 else 8, num_stages=2),
        interpret=interpret,
        name="wanjax_flash_attention",
    )(q, k, v)


def _grid_sweep(
    q: jax.Array, k: jax.Array, v: jax.Array, block_q: int, block_k: int, update: Update, interpret: bool
) -> jax.Array:
    """q [B, N, T', H], k/v [B, N, S', H] -> [B, N, T', H]; grid (B, N, query blocks, key blocks)."""
    b, n, t, h = q.shape
    s = k.shape[2]
    last = s // block_k - 1

    def kernel(q_ref, k_ref, v_ref, o_ref, m_ref, l_ref, acc_ref):
        j = pl.program_id(3)

        @pl.when(j == 0)
        def _init():
            m_ref[...], l_ref[...], acc_ref[...] = _initial_state(block_q, h)

        state = (m_ref[...], l_ref[...], acc_ref[...])
        m_ref[...], l_ref[...], acc_ref[...] = update(q_ref[...], k_ref[...], v_ref[...], j * block_k, state)

        @pl.when(j == last)
        def _write():
            o_ref[...] = (acc_ref[...] / l_ref[...]).astype(o_ref.dtype)

    q_spec = pl.BlockSpec((None, None, block_q, h), lambda bi, ni, qi, ki: (bi, ni, qi, 0))
    kv_spec = pl.BlockSpec((None, None, block_k, h), lambda bi, ni, qi, ki: (bi, ni, ki, 0))
    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype),
        grid=(b, n, t // block_q, s // block_k),
        in_specs=[q_spec, kv_spec, kv_spec],
        out_specs=q_spec,
        scratch_shapes=[
            pltpu.VMEM((block_q, 1), jnp.float32),
            pltpu.VMEM((block_q, 1), jnp.float32),
            pltpu.VMEM((block_q, h), jnp.float32),
        ],
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=("parallel", "parallel", "parallel", "arbitrary")
        ),
        interpret=interpret,
        name="wanjax_flash_attention_tpu",
    )(q, k, v)
