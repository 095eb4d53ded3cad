"""Matrix products in fp8 (e4m3): each operand scaled into e4m3's range, the two multiplied with
fp32 accumulation, the scales applied to the product.

The scales are dynamic and fine-grained: one per row of the activations (per token) and one per
output channel of the weights, each max |x| over the contracted axis over e4m3's largest value
(448), computed as the operands come, so no calibration and no change to the stored weights (a
model stored in bf16 or in unscaled fp8 both run this way). The two quantisations read each operand
once more than a bf16 product does: 0.1-0.6 ms a step for a 14B or 1.3B model's kernels at HBM3's
rate, against a step of 0.2-22 s. On Hopper GPUs XLA hands a dot of two e4m3 operands to cuBLASLt's
fp8 GEMM (twice bf16's tensor-core rate); on a CPU it is emulated (slower than fp32: for tests).

Its error is e4m3's rounding of both operands (3 mantissa bits: at most 1/16 relative per element,
about 3.6% RMS each), which the sum over the contracted axis averages: a relative L2 error of the
product of about 5% for random normal operands (tests/unit/test_fp8_matmul.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

E4M3 = jnp.float8_e4m3fn
E4M3_MAX = float(jnp.finfo(E4M3).max)  # 448


def fp8_dot_general(
    lhs: jax.Array,
    rhs: jax.Array,
    dimension_numbers: tuple[tuple[Sequence[int], Sequence[int]], tuple[Sequence[int], Sequence[int]]],
    precision: Any = None,
    preferred_element_type: Any = None,
    out_sharding: Any = None,
) -> jax.Array:
    """`lax.dot_general` (without batch dimensions, as a linear layer calls it) with both operands in
    e4m3 and fp32 accumulation; the result in `preferred_element_type`, else the operands' dtype.
    `precision` is accepted for the signature and has no meaning in fp8."""
    (lhs_contract, rhs_contract), (lhs_batch, rhs_batch) = dimension_numbers
    if tuple(lhs_batch) or tuple(rhs_batch):
        raise ValueError("fp8_dot_general: batch dimensions are not supported (a linear layer has none)")
    lhs_q, lhs_scale = _quantized(lhs, tuple(lhs_contract))
    rhs_q, rhs_scale = _quantized(rhs, tuple(rhs_contract))
    product = lax.dot_general(
        lhs_q, rhs_q, dimension_numbers, preferred_element_type=jnp.float32, out_sharding=out_sharding
    )
    # the product's axes are lhs's free axes, then rhs's: each scale broadcasts over the other's
    lhs_scale = jnp.squeeze(lhs_scale, tuple(lhs_contract))
    rhs_scale = jnp.squeeze(rhs_scale, tuple(rhs_contract))
    product = product * lhs_scale.reshape(lhs_scale.shape + (1,) * rhs_scale.ndim) * rhs_scale
    return product.astype(preferred_element_type or jnp.result_type(lhs, rhs))


def _quantized(x: jax.Array, contracted: tuple[int, ...]) -> tuple[jax.Array, jax.Array]:
    """x in e4m3 and its fp32 scales (x ~ quantized * scale), one per slice along the free axes."""
    x = x.astype(jnp.float32)
    amax = jnp.max(jnp.abs(x), axis=contracted, keepdims=True)
    scale = jnp.where(amax > 0, amax / E4M3_MAX, 1.0)  # an all-zero slice stays zero
    return (x / scale).astype(E4M3), scale
