"""Matrix products in fp8 (e4m3) or int8: each operand scaled into the type's range, the two
multiplied with fp32 (int32 for int8) accumulation, the scales applied to the product.

The scales are dynamic and fine-grained: one per row of the activations (per token) and one per
output channel of the weights, each max |x| over the contracted axis over the type's largest value
(448 for e4m3, 127 for int8), computed as the operands come, so no calibration and no change to the
stored weights (a model stored in bf16 or in unscaled fp8 both run this way). The weights'
quantisation reads the bf16 kernels and writes their e4m3 copy at every call, where a bf16 product
reads the kernels once: about one more read of them a forward, 2.8 GB for the 1.3B model's blocks
(0.6-0.8 ms at an H200's or H100's 4.8 or 3.35 TB/s) and 28 GB for the 14B's (6-8 ms), under 1% of
their steps (0.18 and 22 s in bf16; the activations' quantisation is smaller still). Scales computed
once at load would spare it and halve the kernels' memory; they would need the layers to hand the
product a quantized kernel rather than the array `nnx.Linear` reads (not done). On Hopper GPUs XLA
hands a dot of two e4m3 operands to cuBLASLt's fp8 GEMM (twice bf16's tensor-core rate), and one of
two int8 operands to cuBLAS's int8 GEMM (the same rate); on a CPU both are emulated (slower than
fp32: for tests). Batch dimensions are allowed (the attention's per-head products,
adapters/jax/attention/sage.py): there the scales are per slice along the batch and free axes alike.

The error of `fp8_dot_general` is e4m3's rounding of both operands (3 mantissa bits: at most 1/16
relative per element, about 3.6% RMS each), which the sum over the contracted axis averages: a
relative L2 error of the product of about 5% for random normal operands; `int8_dot_general`'s is
int8's rounding, 1/254 of each slice's largest value at most: about 1% for normal operands
(tests/unit/test_scaled_matmul.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

E4M3 = jnp.float8_e4m3fn
E4M3_MAX = float(jnp.finfo(E4M3).max)  # 448
INT8_MAX = 127.0  # symmetric: -127..127

Dimensions = tuple[tuple[Sequence[int], Sequence[int]], tuple[Sequence[int], Sequence[int]]]


def _scaled_dot_general(operand_dtype: Any) -> Callable[..., jax.Array]:
    """`lax.dot_general`'s signature, computed with both operands scaled into `operand_dtype`."""

    def dot_general(
        lhs: jax.Array,
        rhs: jax.Array,
        dimension_numbers: Dimensions,
        precision: Any = None,
        preferred_element_type: Any = None,
        out_sharding: Any = None,
    ) -> jax.Array:
        return _scaled_product(lhs, rhs, dimension_numbers, operand_dtype, preferred_element_type, out_sharding)

    return dot_general


fp8_dot_general = _scaled_dot_general(E4M3)
"""`lax.dot_general` with both operands in e4m3 and fp32 accumulation; the result in
`preferred_element_type`, else the operands' dtype. Each operand's scales are per slice along its
free and batch axes (a linear layer's tokens and channels; attention's queries, keys and value
channels per head). `precision` is accepted for the signature and has no meaning here."""
int8_dot_general = _scaled_dot_general(jnp.int8)
"""`fp8_dot_general` with int8 operands (rounded to the nearest step, halves away from zero) and int32
accumulation."""


def _scaled_product(
    lhs: jax.Array,
    rhs: jax.Array,
    dimension_numbers: Dimensions,
    operand_dtype: Any,
    preferred_element_type: Any,
    out_sharding: Any,
) -> jax.Array:
    (lhs_contract, rhs_contract), (lhs_batch, rhs_batch) = dimension_numbers
    lhs_q, lhs_scale = _quantized(lhs, tuple(lhs_contract), operand_dtype)
    rhs_q, rhs_scale = _quantized(rhs, tuple(rhs_contract), operand_dtype)
    accumulation = jnp.int32 if operand_dtype == jnp.int8 else jnp.float32
    product = lax.dot_general(
        lhs_q, rhs_q, dimension_numbers, preferred_element_type=accumulation, out_sharding=out_sharding
    ).astype(jnp.float32)
    # the product's axes are the batch axes, lhs's free axes, then rhs's: each scale in that order,
    # broadcast over the other operand's free axes
    lhs_scale = _in_product_order(lhs_scale, tuple(lhs_contract), tuple(lhs_batch))
    rhs_scale = _in_product_order(rhs_scale, tuple(rhs_contract), tuple(rhs_batch))
    batch, lhs_free = len(lhs_batch), lhs_scale.ndim - len(lhs_batch)
    rhs_free = rhs_scale.shape[batch:]
    lhs_scale = lhs_scale.reshape(lhs_scale.shape + (1,) * len(rhs_free))
    rhs_scale = rhs_scale.reshape(rhs_scale.shape[:batch] + (1,) * lhs_free + rhs_free)
    product = product * lhs_scale * rhs_scale
    return product.astype(preferred_element_type or jnp.result_type(lhs, rhs))


def _quantized(x: jax.Array, contracted: tuple[int, ...], dtype: Any) -> tuple[jax.Array, jax.Array]:
    """x in `dtype` (e4m3 or int8) and its fp32 scales (x ~ quantized * scale, the scales' `contracted`
    axes of size 1), one per slice along the other axes: max |x| over the slice / the type's largest."""
    x = x.astype(jnp.float32)
    largest = E4M3_MAX if dtype == E4M3 else INT8_MAX
    amax = jnp.max(jnp.abs(x), axis=contracted, keepdims=True)
    scale = jnp.where(amax > 0, amax / largest, 1.0)  # an all-zero slice stays zero
    scaled = x / scale
    if dtype == jnp.int8:
        # to the nearest step, halves away from zero (a cast truncates toward zero); with floor, which
        # Pallas's Triton lowering has and `lax.round` it lacks (attention=pallas_sage runs this in a kernel)
        scaled = jnp.sign(scaled) * jnp.floor(jnp.abs(scaled) + 0.5)
    return scaled.astype(dtype), scale


def _in_product_order(scale: jax.Array, contracted: tuple[int, ...], batch: tuple[int, ...]) -> jax.Array:
    """`scale` (its `contracted` axes of size 1) without them, its `batch` axes first, in that order."""
    free = tuple(axis for axis in range(scale.ndim) if axis not in contracted and axis not in batch)
    ordered = jnp.transpose(scale, batch + free + contracted)
    return ordered.reshape(ordered.shape[: len(batch) + len(free)])
