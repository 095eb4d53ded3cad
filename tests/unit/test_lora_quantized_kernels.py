"""Per-request LoRAs on quantized kernels (`adapters/jax/lora/quantized.py`): a GGUF or scaled fp8 stack
keeps its storage and carries the deltas' factors beside it, read as the dequantized kernel plus
every delta of its layer (the load-time merge's sum on the dequantized weights), zero for a layer
no LoRA changes; LoRAs of different ranks share the padded factors; a full (diff) delta is refused."""

import gguf
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

from test_gguf_blocks import random_blocks
from wanjax.adapters.jax.lora.factors import DeviceDelta
from wanjax.adapters.jax.lora.quantized import lora_kernel
from wanjax.adapters.jax.platform.packed_kernel import PackedKernel
from wanjax.adapters.jax.platform.scaled_kernel import ScaledKernel
from wanjax.adapters.jax.transformer.weight_names import Slot
from wanjax.domain.errors import CheckpointError

LAYERS, INPUTS, OUTPUTS = 3, 256, 5


def _kernels() -> dict[str, tuple[object, np.ndarray]]:
    """Each kind of quantized stack [layers, in, out] and its dequantized float32 kernel."""
    blocks = random_blocks("Q4_K", LAYERS * OUTPUTS, seed=11).reshape(LAYERS, OUTPUTS, 1, -1)
    packed = gguf.quants.dequantize(blocks.reshape(LAYERS, OUTPUTS, -1), gguf.GGMLQuantizationType.Q4_K)
    values = np.random.default_rng(1).normal(size=(LAYERS, INPUTS, OUTPUTS)).astype(ml_dtypes.float8_e4m3fn)
    scale = np.array([0.5, 0.25, 2.0], np.float32)
    return {
        "gguf": (PackedKernel(jnp.asarray(blocks), "Q4_K", jnp.float32), packed.swapaxes(-1, -2)),
        "scaled_fp8": (ScaledKernel(jnp.asarray(values), jnp.asarray(scale), jnp.float32),
                       values.astype(np.float32) * scale[:, None, None]),
    }  # fmt: skip


def _delta(rank: int, seed: int, factor: float = 0.5) -> DeviceDelta:
    rng = np.random.default_rng(seed)
    up, down = rng.normal(size=(OUTPUTS, rank)), rng.normal(size=(rank, INPUTS))
    return DeviceDelta(jnp.asarray(up, jnp.float32), jnp.asarray(down, jnp.float32), np.float32(factor))


@pytest.mark.parametrize("kind", ["gguf", "scaled_fp8"])
def test_a_quantized_stack_reads_as_its_dequantized_layers_plus_their_deltas(kind):
    base, dequantized = _kernels()[kind]
    first, second, third = _delta(2, 1), _delta(4, 2, factor=0.25), _delta(3, 3)
    slot = lambda layer: Slot("blocks.ffn.net.2.weight", ("blocks", "kernel"), layer, (1, 0))  # noqa: E731
    targets = [(slot(0), ((first, np.float32(0.8)), (second, np.float32(-0.3)))),
               (slot(2), ((third, np.float32(1.2)),))]  # fmt: skip
    kernel = lora_kernel(base, targets)
    assert kernel.shape == base.shape and kernel.down.shape == (LAYERS, 6, INPUTS)  # ranks 2 + 4 on layer 0
    expected = dequantized.copy()
    for layer, terms in ((0, targets[0][1]), (2, targets[1][1])):
        for delta, scale in terms:
            expected[layer] += (scale * delta.factor * (np.asarray(delta.up) @ np.asarray(delta.down))).T
    np.testing.assert_allclose(np.asarray(kernel[...]), expected, rtol=0, atol=1e-5 * np.abs(expected).max())
    assert np.array_equal(np.asarray(kernel[...])[1], dequantized[1])  # no LoRA on layer 1: the kernel as stored
    layer = jax.tree.map(lambda a: a[2], kernel)  # how the scan slices it
    np.testing.assert_allclose(np.asarray(layer[...]), expected[2], rtol=0, atol=1e-5 * np.abs(expected).max())


def test_a_full_delta_on_a_quantized_kernel_is_refused_naming_the_fix():
    base, _ = _kernels()["gguf"]
    full = DeviceDelta(jnp.zeros((OUTPUTS, INPUTS)), None, np.float32(1))
    with pytest.raises(CheckpointError, match="blocks.0.ffn.net.2.weight .*bf16 release"):
        slot = Slot("blocks.0.ffn.net.2.weight", ("blocks", "kernel"), 0, (1, 0))
        lora_kernel(base, [(slot, ((full, np.float32(1)),))])
