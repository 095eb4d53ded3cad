"""The blocks' FFN activation in its matmul's epilogue (`activation_in_matmul_epilogue`, on GPUs).

XLA's GPU compiler fuses bias and tanh GELU into cuBLASLt's BIAS_GELU epilogue only where the GELU's
operations read the matmul's output in its own dtype; an fp32 convert between them keeps GELU a pass
of its own over [B, S, F], the block's largest tensor (docs/performance.md, "Fewer bytes around the
matmuls"). No GPU compiles here: these tests hold the program XLA is handed to that form, the fp32
path unchanged, and the builder's choice; the numerics of the fused form are
tests/parity/test_ffn_epilogue_parity.py's.
"""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from wanjax.adapters.jax.attention.xla import XlaAttention
from wanjax.adapters.jax.transformer.blocks import CrossAttentionKV, WanBlock
from wanjax.adapters.jax.transformer.rope import rope_tables
from wanjax.adapters.jax.transformer.runtime import TransformerRuntime
from wanjax.application import builders
from wanjax.domain.attention_call import SELF, AttentionCall
from wanjax.domain.settings import DenoiserSettings
from wanjax.domain.specs import TransformerSpec

HEADS, HEAD_DIM, FFN = 2, 16, 88  # 88: no other dimension of the block has this size
B, GRID, TOKENS = 2, (1, 4, 6), 5
S, D = GRID[0] * GRID[1] * GRID[2], HEADS * HEAD_DIM
SPEC = TransformerSpec(num_attention_heads=HEADS, attention_head_dim=HEAD_DIM, text_dim=16, freq_dim=16,
                       ffn_dim=FFN, num_layers=1)  # fmt: skip


def _block(dtype: jnp.dtype, in_epilogue: bool) -> WanBlock:
    runtime = TransformerRuntime(dtype=dtype, param_dtype=dtype, activation_in_matmul_epilogue=in_epilogue)
    return WanBlock(SPEC, runtime, rngs=nnx.Rngs(0))


def _inputs(dtype: jnp.dtype) -> tuple[jax.Array, CrossAttentionKV, jax.Array]:
    keys = jax.random.split(jax.random.key(1), 4)
    x = jax.random.normal(keys[0], (B, S, D), dtype)
    kv = CrossAttentionKV(*(jax.random.normal(k, (B, TOKENS, HEADS, HEAD_DIM), dtype) for k in keys[1:3]))
    return x, kv, jax.random.normal(keys[3], (B, 1, 6, D), jnp.float32)


def _forward(block: WanBlock):
    graphdef, _ = nnx.split(block)
    rope = rope_tables(HEAD_DIM, GRID, 64)

    def forward(state: nnx.State, x: jax.Array, kv: CrossAttentionKV, temb6: jax.Array) -> jax.Array:
        return nnx.merge(graphdef, state)(x, kv, temb6, rope, AttentionCall(kind=SELF))

    return jax.jit(forward)


@pytest.mark.parametrize("in_epilogue", [True, False], ids=["epilogue", "own-pass"])
def test_the_gelu_reads_the_bf16_matmul_output_only_in_the_epilogue_form(in_epilogue: bool) -> None:
    block = _block(jnp.bfloat16, in_epilogue)
    program = _forward(block).lower(nnx.state(block), *_inputs(jnp.bfloat16)).as_text()
    f32_hidden = re.findall(rf"tensor<{B}x{S}x{FFN}xf32>", program)
    assert re.search(rf"tensor<{B}x{S}x{FFN}xbf16>", program)  # the matmuls' side of the hidden tensor
    # the epilogue form: no f32 value of the hidden shape, nothing for XLA to keep as a pass of its own;
    # the default: GELU's fp32 evaluation (torch's opmath), which XLA runs as one
    assert (not f32_hidden) if in_epilogue else f32_hidden


def test_the_epilogue_form_changes_nothing_in_fp32() -> None:
    inputs = _inputs(jnp.float32)
    outputs = [np.asarray(_forward(b)(nnx.state(b), *inputs)) for b in (_block(jnp.float32, f) for f in (True, False))]
    np.testing.assert_array_equal(*outputs)


@pytest.mark.parametrize(
    "platform, matmul_dtype, in_epilogue",
    [("gpu", "auto", True), ("cpu", "auto", False), ("tpu", "auto", False), ("gpu", "float8_e4m3fn", False)],
)
def test_the_builder_puts_the_gelu_in_the_epilogue_of_gpus_bf16_matmuls_only(
    monkeypatch: pytest.MonkeyPatch, platform: str, matmul_dtype: str, in_epilogue: bool
) -> None:
    """fp8: the product's scales come between GEMM and GELU, so XLA fuses nothing (a deviceless H100
    compile runs that GELU in bf16 arithmetic, its constants rounded to bf16): it keeps its fp32 pass."""
    monkeypatch.setattr(builders, "default_platform", lambda: platform)
    settings = DenoiserSettings(activations_dtype="bfloat16", weights_dtype="bfloat16", matmul_dtype=matmul_dtype)
    runtime = builders.transformer_runtime(settings, "bfloat16", XlaAttention(), None, None)
    assert runtime.activation_in_matmul_epilogue is in_epilogue
