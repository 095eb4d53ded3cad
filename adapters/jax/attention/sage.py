"""SageAttention-style quantized attention in plain XLA (`attention=blockwise_sage`): the blockwise
kernel's online softmax with q k^T in int8 and p v in fp8 (e4m3), accumulated in int32 and fp32.

What SageAttention (Zhang et al., 2024-25) found and this follows: q k^T tolerates int8 (7 bits)
where e4m3's 3 mantissa bits move the logits by more than softmax forgives at real magnitudes, and
p v tolerates fp8 (p in [0, 1], v per channel). Here:
- keys are smoothed first: their mean over the tokens is subtracted (q (k - m) = q k - q m, a
  constant per query, which softmax ignores), so a channel every key shares does not take the
  int8 range from what tells the keys apart;
- q and k get one int8 scale per token and head (max |x| / 127 over the head's channels);
- p gets one e4m3 scale per query row of each key block (its largest value there / 448), v one
  per channel and head of the block (the blockwise products, `BlockProducts`, of
  adapters/jax/platform/scaled_matmul.py's `int8_dot_general` and `fp8_dot_general`);
- the softmax, its running max and sum stay fp32 as in the blockwise kernel.

On a CPU the int8 and fp8 products are emulated (slower than bf16: for tests); on a Hopper GPU
whether XLA gives them to cuBLAS's int8 and fp8 GEMMs, and at what speed, is what the device
check's `attention_sage_32760` stage measures. Its error against exact attention is stated and
bounded in tests/unit/test_sage_attention.py and docs/sampling.md.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from wanjax.adapters.jax.attention.blockwise import BlockProducts, BlockwiseAttention
from wanjax.adapters.jax.platform.scaled_matmul import fp8_dot_general, int8_dot_general
from wanjax.domain.attention_call import FEATURES, AttentionCall, refuse_unless_honoured

SAGE_PRODUCTS = BlockProducts(logits=int8_dot_general, values=fp8_dot_general)


@dataclasses.dataclass(frozen=True)
class SageAttention:
    """int8 q k^T and fp8 p v inside the blockwise online softmax (`AttentionFn`; see the module).
    Honours every call as the blockwise kernel does (structures included); never pads keys."""

    block_q: int = 1024
    block_k: int = 512

    @property
    def key_alignment(self) -> int:
        """Keys are never padded to a tile here."""
        return 1

    def check(self, call: AttentionCall) -> None:
        refuse_unless_honoured("attention=blockwise_sage", frozenset(FEATURES), call, "")

    def __call__(
        self,
        q: jax.Array,
        k: jax.Array,
        v: jax.Array,
        call: AttentionCall,
        key_value_seq_lengths: jax.Array | None = None,
    ) -> jax.Array:
        """q [B, T, N, H], k/v [B, S, N, H] -> [B, T, N, H]; `key_value_seq_lengths` [B] masks each
        row's keys past its length (the smoothing's mean counts them: any shift of every key is
        softmax's to ignore)."""
        self.check(call)
        k32 = k.astype(jnp.float32)
        smoothed = (k32 - k32.mean(axis=1, keepdims=True)).astype(k.dtype)  # [B, S, N, H]
        blockwise = BlockwiseAttention(self.block_q, self.block_k, products=SAGE_PRODUCTS)
        return blockwise(q, smoothed, v, call, key_value_seq_lengths)
