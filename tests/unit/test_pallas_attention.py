"""The Pallas flash-attention kernel equals the XLA backend, over odd and power-of-two sizes.

On CPU the kernel runs in Pallas interpret mode (slow), so shapes stay tiny and blocks
small enough that 64 and 300 span several query and key blocks. Both key sweeps run:
the in-kernel loop (the GPU one) and the key grid axis (the TPU one).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from wanjax.adapters.jax.attention.xla import XlaAttention
from wanjax.adapters.jax.attention.pallas import PallasAttention
from wanjax.adapters.jax.transformer.model import WanTransformer
from wanjax.adapters.jax.transformer.runtime import TransformerRuntime
from wanjax.domain.attention_call import CROSS, AttentionCall
from wanjax.domain.specs import TransformerSpec

CALL = AttentionCall(kind=CROSS)  # T != S in most cases

# fp32: both sides accumulate in fp32 but in a different order (blockwise online softmax
# vs one softmax); measured max |diff| 7e-7 over CASES, outputs of magnitude ~1.
FP32_ATOL = 1e-5
# bf16: probabilities are rounded to bf16 before the PV matmul on both sides, at
# different points (per block, after rescaling by the running max, vs once), and the
# output is rounded to bf16; measured max |diff| 7.8e-3 over CASES, one bf16 ulp in [1, 2).
BF16_ATOL = 2e-2

CASES = [  # (T, S, N, H): every T and S in {1, 3, 7, 64, 300}, N 1..3, H 8..64, T != S
    (1, 1, 1, 8),
    (3, 7, 2, 16),
    (7, 3, 3, 32),
    (64, 64, 2, 64),
    (300, 7, 1, 16),
    (1, 300, 3, 8),
    (64, 300, 1, 32),
    (300, 64, 2, 8),
]
SMALL_BLOCKS = dict(block_q=32, block_k=64)


def qkv(shape: tuple[int, int, int, int], dtype, batch: int = 2, seed: int = 0) -> tuple[jax.Array, ...]:
    t, s, n, h = shape
    rng = np.random.default_rng(seed)
    return tuple(
        jnp.asarray(rng.standard_normal((batch, length, n, h)), dtype) for length in (t, s, s)
    )  # q [B, T, N, H], k/v [B, S, N, H]


def max_error(a: jax.Array, b: jax.Array) -> float:
    return float(jnp.max(jnp.abs(a.astype(jnp.float32) - b.astype(jnp.float32))))


@pytest.mark.parametrize("shape", CASES)
def test_loop_sweep_fp32_equals_xla(shape):
    q, k, v = qkv(shape, jnp.float32)
    out = PallasAttention(**SMALL_BLOCKS, keys_on_grid=False)(q, k, v, CALL)
    assert out.shape == q.shape and out.dtype == q.dtype
    assert max_error(out, XlaAttention()(q, k, v, CALL)) < FP32_ATOL


@pytest.mark.parametrize("shape", [CASES[1], CASES[6], CASES[7]])
def test_grid_sweep_fp32_equals_xla(shape):
    q, k, v = qkv(shape, jnp.float32)
    out = PallasAttention(**SMALL_BLOCKS, keys_on_grid=True)(q, k, v, CALL)
    assert max_error(out, XlaAttention()(q, k, v, CALL)) < FP32_ATOL


@pytest.mark.parametrize("keys_on_grid", [False, True])
@pytest.mark.parametrize("shape", [CASES[2], CASES[6]])
def test_bf16_equals_xla(shape, keys_on_grid):
    q, k, v = qkv(shape, jnp.bfloat16)
    out = PallasAttention(**SMALL_BLOCKS, keys_on_grid=keys_on_grid)(q, k, v, CALL)
    assert out.dtype == jnp.bfloat16
    assert max_error(out, XlaAttention()(q, k, v, CALL)) < BF16_ATOL


def test_defaults_interpret_on_cpu_under_jit():
    """Default blocks (128) and interpret mode chosen automatically; 257 keys (CLIP
    image tokens) are padded to 384 and the padding masked out."""
    q, k, v = qkv((20, 257, 2, 16), jnp.float32, batch=1)
    attention = PallasAttention()
    assert attention.key_alignment == 128
    out = jax.jit(attention, static_argnums=3)(q, k, v, CALL)
    assert max_error(out, XlaAttention()(q, k, v, CALL)) < FP32_ATOL


def test_transformer_with_pallas_equals_xla():
    """The kernel as the layers receive it: inside nnx.scan over the blocks, under jit."""
    spec = TransformerSpec(
        num_attention_heads=2, attention_head_dim=8, text_dim=16, freq_dim=8, ffn_dim=16, num_layers=2
    )

    def velocity(attention) -> jax.Array:
        runtime = TransformerRuntime(dtype=jnp.float32, param_dtype=jnp.float32, attention=attention)
        model = WanTransformer(spec, runtime, rngs=nnx.Rngs(0))
        latents = jax.random.normal(jax.random.key(1), (1, 2, 4, 6, 16))  # 12 tokens
        context = jax.random.normal(jax.random.key(2), (1, 5, 16))
        return nnx.jit(lambda m, *args: m(*args))(model, latents, jnp.array([500.0]), context)

    assert max_error(velocity(PallasAttention(block_q=16, block_k=16)), velocity(XlaAttention())) < FP32_ATOL


@pytest.mark.parametrize("platform", ["tpu", "cuda"])
def test_lowers_for_accelerators_from_any_host(platform):
    """The sweep each accelerator uses lowers to its kernel IR (Mosaic for TPU, Triton for
    GPU) at a Wan head layout with odd lengths; only compiling needs the device."""
    attention = PallasAttention(interpret=False, keys_on_grid=platform == "tpu")
    q = jax.ShapeDtypeStruct((1, 300, 12, 128), jnp.bfloat16)
    kv = jax.ShapeDtypeStruct((1, 257, 12, 128), jnp.bfloat16)
    lowered = jax.jit(attention, static_argnums=3).trace(q, kv, kv, CALL).lower(lowering_platforms=(platform,))
    assert "wanjax_flash_attention" in lowered.as_text()
