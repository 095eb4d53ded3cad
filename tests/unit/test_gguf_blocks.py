"""The device's GGUF dequantization against the `gguf` package's numpy one: equal bit for bit in
float32, for every block type wanjax keeps packed, over random blocks with edge scales."""

import gguf
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from wanjax.adapters.jax.platform.gguf_blocks import dequantize
from wanjax.adapters.jax.platform.packed_kernel import PackedKernel, packed_shape
from wanjax.domain.quantization import PACKED_BLOCKS, SCALE_OFFSETS

EDGE_SCALES = np.array([0.0, -0.0, 6.0e-8, -6.0e-8, 6.1e-5, 1.0, -1.0, 0.33325, 65504.0, -65504.0], np.float16)
QUANTIZABLE = [t for t in PACKED_BLOCKS if t.endswith(("_0", "_1"))]  # what gguf.quants.quantize writes


def random_blocks(block_type: str, count: int, seed: int) -> np.ndarray:
    """Random bytes with finite scales: random float16 ones, and every edge scale in some block."""
    rng = np.random.default_rng(seed)
    blocks = rng.integers(0, 256, size=(count, PACKED_BLOCKS[block_type][1]), dtype=np.uint8)
    for at in SCALE_OFFSETS[block_type]:
        scales = rng.normal(0, 0.05, count).astype(np.float16)
        scales[: len(EDGE_SCALES)] = np.roll(EDGE_SCALES, at)
        blocks[:, at : at + 2] = scales.view(np.uint8).reshape(count, 2)
    return blocks


def assert_bitwise(got: jax.Array, want: np.ndarray) -> None:
    got = np.asarray(got)
    assert got.dtype == np.float32 and got.shape == want.shape
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("block_type", list(PACKED_BLOCKS))
def test_random_blocks_dequantize_as_the_gguf_package_does(block_type):
    rows, per_row = 4, 6
    blocks = random_blocks(block_type, rows * per_row, seed=len(block_type) + ord(block_type[1]))
    want = gguf.quants.dequantize(blocks.reshape(rows, -1), gguf.GGMLQuantizationType[block_type])
    assert np.isfinite(want).all()
    got = jax.jit(dequantize, static_argnums=1)(jnp.asarray(blocks.reshape(rows, per_row, -1)), block_type)
    assert_bitwise(got, want)


@pytest.mark.parametrize("block_type", QUANTIZABLE)
def test_quantized_weights_dequantize_as_the_gguf_package_does(block_type):
    rng = np.random.default_rng(3)
    weights = rng.normal(0, 0.02, (3, 2, 64)).astype(np.float32)
    weights[0, 0, :32] = 0.0  # an all-zero block: a zero scale
    weights[1, 1, :32] *= 1e4  # a large one
    packed = gguf.quants.quantize(weights, gguf.GGMLQuantizationType[block_type])
    want = gguf.quants.dequantize(packed, gguf.GGMLQuantizationType[block_type])
    size, type_size = PACKED_BLOCKS[block_type]
    got = dequantize(jnp.asarray(packed.reshape(3, 2, 64 // size, type_size)), block_type)
    assert_bitwise(got, want)


def test_a_packed_kernel_reads_as_the_dequantized_kernel_in_its_layers_layout():
    blocks = random_blocks("Q4_K", 2 * 3 * 2, seed=7).reshape(2, 3, 2, -1)  # [layers, out, in / 256, bytes]
    kernel = PackedKernel(jnp.asarray(blocks), "Q4_K", jnp.float32)
    assert kernel.shape == (2, 512, 3) and packed_shape(kernel.shape, "Q4_K") == blocks.shape
    want = gguf.quants.dequantize(blocks.reshape(2, 3, -1), gguf.GGMLQuantizationType.Q4_K)
    assert_bitwise(kernel[...], np.ascontiguousarray(want.swapaxes(-1, -2)))
    layer = jax.tree.map(lambda a: a[1], kernel)  # how a scan slices the stack
    assert layer.shape == (512, 3)
    assert_bitwise(layer[...], np.ascontiguousarray(want[1].T))
    assert kernel.nbytes == blocks.size
