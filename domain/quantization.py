"""The GGUF block types wanjax reads, and what each costs per weight.

A GGUF tensor's rows are cut into blocks of `block_size` values stored in `type_size` bytes each
(ggml's formats). The float types are read as they are; the quantized ones are kept packed on the
device and dequantized per layer inside the step (adapters/jax/platform/packed_kernel.py).
"""

from __future__ import annotations

QK_K = 256  # values in a K-quant super-block

PACKED_BLOCKS: dict[str, tuple[int, int]] = {
    "Q8_0": (32, 34),
    "Q6_K": (QK_K, 210),
    "Q5_K": (QK_K, 176),
    "Q5_0": (32, 22),
    "Q5_1": (32, 24),
    "Q4_K": (QK_K, 144),
    "Q4_0": (32, 18),
    "Q4_1": (32, 20),
    "Q3_K": (QK_K, 110),
    "Q2_K": (QK_K, 84),
}
"""(values per block, bytes per block) of each quantized block type, as the Wan GGUF releases use them."""

SCALE_OFFSETS: dict[str, tuple[int, ...]] = {
    "Q8_0": (0,), "Q6_K": (208,), "Q5_K": (0, 2), "Q5_0": (0,), "Q5_1": (0, 2),
    "Q4_K": (0, 2), "Q4_0": (0,), "Q4_1": (0, 2), "Q3_K": (108,), "Q2_K": (80, 82),
}  # fmt: skip
"""Where each type's float16 scales (d, and dmin where it has one) sit in its block."""

SCALED_FP8 = "scaled_fp8"
"""ComfyUI's scaled fp8 storage: e4m3 values with a float32 scale per tensor (one byte per weight)."""

STORED_KERNELS = (*PACKED_BLOCKS, SCALED_FP8)
"""How a quantized file's block kernels can stay on the device (`wanjax bench --kernels`)."""

FLOAT_TYPES: dict[str, int] = {"F32": 4, "F16": 2, "BF16": 2}
"""The unquantized GGUF types read as arrays, with their bytes per value."""

GGUF_TYPES = (*FLOAT_TYPES, *PACKED_BLOCKS)


def bytes_per_value(block_type: str) -> float:
    """What one weight costs stored as `block_type` (Q4_K: 144 bytes / 256 values = 0.5625)."""
    if block_type == SCALED_FP8:
        return 1.0
    if block_type in FLOAT_TYPES:
        return float(FLOAT_TYPES[block_type])
    size, type_size = PACKED_BLOCKS[block_type]
    return type_size / size
