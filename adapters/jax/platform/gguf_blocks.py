"""GGUF quantized blocks -> float32 values, in JAX, inside whatever computation reads them.

A GGUF tensor of block type T is cut along its last axis into blocks of `PACKED_BLOCKS[T][0]` values,
each stored in `PACKED_BLOCKS[T][1]` bytes (domain/quantization.py): float16 scales and packed
integers (ggml's formats, `ggml-common.h`). `dequantize(blocks, T)` turns uint8 [..., type_size]
into float32 [..., block_size] with elementwise integer and float arithmetic only, so XLA fuses it
into the layer that reads the weight: the packed bytes are what stays in device memory.

Exact: every product below multiplies a float16 scale (11 significant bits) by small integers (at most
13 more bits), so it is exact in float32 and each value rounds at most once, at its last addition, as
the `gguf` package's numpy dequantization rounds it (fused multiply-adds round the same way, the
products being exact). tests/unit/test_gguf_blocks.py checks the two equal, bit for bit, per type.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from wanjax.domain.quantization import QK_K


def _f16(blocks: jax.Array, at: int) -> jax.Array:
    """The float16 at byte `at` of each block (little-endian), as float32 [..., 1]."""
    return lax.bitcast_convert_type(blocks[..., at : at + 2], jnp.float16).astype(jnp.float32)[..., None]


def _bits(packed: jax.Array, shifts: tuple[int, ...], mask: int) -> jax.Array:
    """uint8 [..., n] -> [..., len(shifts), n]: the field at each shift (`mask` wide) of every byte."""
    shift = jnp.asarray(shifts, jnp.uint8)[:, None]
    return (packed[..., None, :] >> shift) & jnp.uint8(mask)


def _nibbles(packed: jax.Array) -> jax.Array:
    """uint8 [..., n] -> [..., 2n]: the low nibbles of all n bytes, then their high nibbles."""
    return _bits(packed, (0, 4), 0x0F).reshape(*packed.shape[:-1], 2 * packed.shape[-1])


def _high_bits(qh: jax.Array, count: int) -> jax.Array:
    """The first `count` bits of the little-endian bit field `qh` (uint8 [..., count / 8]), uint8 [..., count]."""
    return _bits(qh, tuple(range(8)), 1).swapaxes(-1, -2).reshape(*qh.shape[:-1], count)


def _q8_0(b: jax.Array) -> jax.Array:
    q = lax.bitcast_convert_type(b[..., 2:34], jnp.int8).astype(jnp.float32)
    return q * _f16(b, 0)


def _q4_0(b: jax.Array) -> jax.Array:
    q = _nibbles(b[..., 2:18]).astype(jnp.int8) - jnp.int8(8)
    return _f16(b, 0) * q.astype(jnp.float32)


def _q4_1(b: jax.Array) -> jax.Array:
    q = _nibbles(b[..., 4:20]).astype(jnp.float32)
    return _f16(b, 0) * q + _f16(b, 2)


def _five_bit(b: jax.Array, qh_at: int) -> jax.Array:
    """The 32 five-bit values of a Q5_0 / Q5_1 block: four high-bit bytes at `qh_at`, then 16 nibble bytes."""
    low = _nibbles(b[..., qh_at + 4 : qh_at + 20])
    return low | (_high_bits(b[..., qh_at : qh_at + 4], 32) << jnp.uint8(4))


def _q5_0(b: jax.Array) -> jax.Array:
    q = _five_bit(b, 2).astype(jnp.int8) - jnp.int8(16)
    return _f16(b, 0) * q.astype(jnp.float32)


def _q5_1(b: jax.Array) -> jax.Array:
    return _f16(b, 0) * _five_bit(b, 4).astype(jnp.float32) + _f16(b, 2)


def _two_bit(qs: jax.Array) -> jax.Array:
    """The 256 two-bit values of 64 bytes: per half of 32 bytes, the fields at shifts 0, 2, 4, 6 in turn."""
    halves = qs.reshape(*qs.shape[:-1], 2, 32)
    return _bits(halves, (0, 2, 4, 6), 0x03).reshape(*qs.shape[:-1], QK_K)


def _sub_blocks(values: jax.Array, count: int) -> jax.Array:
    return values.reshape(*values.shape[:-1], count, QK_K // count)


def _q2_k(b: jax.Array) -> jax.Array:
    scales = b[..., 0:16]
    d, dmin = _f16(b, 80), _f16(b, 82)
    dl = (d * (scales & jnp.uint8(0x0F)).astype(jnp.float32))[..., None]
    ml = (dmin * (scales >> jnp.uint8(4)).astype(jnp.float32))[..., None]
    q = _sub_blocks(_two_bit(b[..., 16:80]), 16).astype(jnp.float32)
    return (dl * q - ml).reshape(*b.shape[:-1], QK_K)


def _q3_k_scales(s: jax.Array) -> jax.Array:
    """The 16 six-bit signed scales of a Q3_K block from its 12 scale bytes, float32."""
    low = _nibbles(s[..., 0:8])
    high = _bits(s[..., 8:12], (0, 2, 4, 6), 0x03).reshape(*s.shape[:-1], 16)
    return ((low | (high << jnp.uint8(4))).astype(jnp.int8) - jnp.int8(32)).astype(jnp.float32)


def _q3_k(b: jax.Array) -> jax.Array:
    d = _f16(b, 108)
    dl = (d * _q3_k_scales(b[..., 96:108]))[..., None]
    low = _two_bit(b[..., 32:96]).astype(jnp.int8)
    unset = (_bits(b[..., 0:32], tuple(range(8)), 1) ^ jnp.uint8(1)).reshape(*b.shape[:-1], QK_K)
    q = (low - (unset << jnp.uint8(2)).astype(jnp.int8)).astype(jnp.float32)  # the high bit unset subtracts 4
    return (dl * _sub_blocks(q, 16)).reshape(*b.shape[:-1], QK_K)


def _k_scale_min(s: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The eight six-bit scales and mins of a Q4_K / Q5_K block from its 12 scale bytes."""
    d, m, md = s[..., 0:4], s[..., 4:8], s[..., 8:12]
    scale = jnp.concatenate([d & jnp.uint8(0x3F), (md & jnp.uint8(0x0F)) | ((d >> jnp.uint8(2)) & jnp.uint8(0x30))], -1)
    low = jnp.concatenate([m & jnp.uint8(0x3F), (md >> jnp.uint8(4)) | ((m >> jnp.uint8(2)) & jnp.uint8(0x30))], -1)
    return scale.astype(jnp.float32), low.astype(jnp.float32)


def _four_bit_k(qs: jax.Array) -> jax.Array:
    """The 256 nibbles of 128 bytes: per 32 bytes, their low nibbles, then their high nibbles."""
    return _nibbles(qs.reshape(*qs.shape[:-1], 4, 32)).reshape(*qs.shape[:-1], QK_K)


def _k_affine(b: jax.Array, q: jax.Array) -> jax.Array:
    """d * scale * q - dmin * min per 32-value sub-block of a Q4_K / Q5_K block."""
    scale, low = _k_scale_min(b[..., 4:16])
    d = (_f16(b, 0) * scale)[..., None]
    dm = (_f16(b, 2) * low)[..., None]
    return (d * _sub_blocks(q.astype(jnp.float32), 8) - dm).reshape(*b.shape[:-1], QK_K)


def _q4_k(b: jax.Array) -> jax.Array:
    return _k_affine(b, _four_bit_k(b[..., 16:144]))


def _q5_k(b: jax.Array) -> jax.Array:
    high = _bits(b[..., 16:48], tuple(range(8)), 1).reshape(*b.shape[:-1], QK_K)
    return _k_affine(b, _four_bit_k(b[..., 48:176]) | (high << jnp.uint8(4)))


def _q6_k(b: jax.Array) -> jax.Array:
    low = _nibbles(b[..., 0:128].reshape(*b.shape[:-1], 2, 64)).reshape(*b.shape[:-1], QK_K)
    high = _two_bit(b[..., 128:192])
    q = (low | (high << jnp.uint8(4))).astype(jnp.int8) - jnp.int8(32)
    scales = lax.bitcast_convert_type(b[..., 192:208], jnp.int8).astype(jnp.float32)
    d = (_f16(b, 208) * scales)[..., None]
    return (d * _sub_blocks(q.astype(jnp.float32), 16)).reshape(*b.shape[:-1], QK_K)


_DEQUANTIZE = {
    "Q8_0": _q8_0, "Q5_0": _q5_0, "Q5_1": _q5_1, "Q4_0": _q4_0, "Q4_1": _q4_1,
    "Q6_K": _q6_k, "Q5_K": _q5_k, "Q4_K": _q4_k, "Q3_K": _q3_k, "Q2_K": _q2_k,
}  # fmt: skip


def dequantize(blocks: jax.Array, block_type: str) -> jax.Array:
    """uint8 [..., n, type_size] blocks of `block_type` (a key of `PACKED_BLOCKS`) -> float32 [..., n * block_size]."""
    values = _DEQUANTIZE[block_type](blocks)
    return values.reshape(*blocks.shape[:-2], blocks.shape[-2] * values.shape[-1])
