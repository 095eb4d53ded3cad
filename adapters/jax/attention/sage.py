"""SageAttention-style quantized attention: an online softmax with q k^T in int8 and p v in fp8 (e4m3),
accumulated in int32 and fp32, in plain XLA (`attention=blockwise_sage`: the blockwise kernel) or in
the Pallas flash kernel (`attention=pallas_sage`: Triton on GPUs, interpreted on CPU), both computing
as `SAGE` says, each block's quantization inside the kernel.

What SageAttention (Zhang et al., 2024-25) found and this follows: q k^T tolerates int8 (7 bits)
where e4m3's 3 mantissa bits move the logits by more than softmax forgives at real magnitudes, and
p v tolerates fp8 (p in [0, 1], v per channel): on random q, k of standard deviation 3 (300 tokens,
64 channels) both products in e4m3 are 11.8% off exact attention in relative L2, this 3.7%. Here:
- keys are smoothed first: their mean over the tokens is subtracted (q (k - m) = q k - q m, a
  constant per query, which softmax ignores), so a channel every key shares does not take the
  int8 range from what tells the keys apart;
- q and k get one int8 scale per token and head (max |x| / 127 over the head's channels);
- p gets one e4m3 scale per query row of each key block (its largest value there / 448), v one
  per channel and head of the block (the blockwise kernel's `BlockArithmetic` made of
  adapters/jax/platform/scaled_matmul.py's `int8_dot_general` and `fp8_dot_general`);
- the softmax, its running max and sum stay fp32 as in the blockwise kernel.

On a CPU the int8 and fp8 products are emulated (slower than bf16: for tests); on a Hopper GPU
whether XLA gives them to cuBLAS's int8 and fp8 GEMMs, and whether Triton's int8 and fp8 dots make
the Pallas kernel faster than bf16's (it quantizes q and each key block again for every pair of
blocks, where SageAttention quantizes q and k once before its kernel), is what the device check's
`attention_sage_32760` stage measures. Its error against exact attention is stated and
bounded in tests/unit/test_sage_attention.py and docs/sampling.md.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from wanjax.adapters.jax.attention.blockwise import BlockArithmetic, BlockwiseAttention
from wanjax.adapters.jax.attention.pallas import PallasAttention
from wanjax.adapters.jax.platform.scaled_matmul import fp8_dot_general, int8_dot_general


def smoothed(k: jax.Array) -> jax.Array:
    """k [B, S, N, H] less its mean over the S tokens (each head's keys), computed in fp32, in k's
    dtype. Padded keys count in the mean: any shift every key shares is softmax's to ignore."""
    k32 = k.astype(jnp.float32)
    return (k32 - k32.mean(axis=1, keepdims=True)).astype(k.dtype)


SAGE = BlockArithmetic(logits=int8_dot_general, values=fp8_dot_general, keys=smoothed)


def sage_attention(block_q: int = 1024, block_k: int = 512) -> BlockwiseAttention:
    """The blockwise kernel computing as `SAGE` (see the module): honours every call as it does
    (structures included), never pads keys."""
    return BlockwiseAttention(block_q, block_k, arithmetic=SAGE)


def pallas_sage_attention(block_q: int = 128, block_k: int = 128, interpret: bool | None = None) -> PallasAttention:
    """The Pallas flash kernel computing as `SAGE`: refuses, as `attention=pallas` does, a call with a
    structure (attention=blockwise_sage honours it); pads keys to `block_k` inside and masks them."""
    return PallasAttention(block_q, block_k, interpret, arithmetic=SAGE, setting="attention=pallas_sage")
