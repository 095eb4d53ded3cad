"""The memory-bounded attention: the blockwise kernel (attention=auto on CPU) equals the exact
XLA reference, never allocates the [T, S] logits, and `auto` resolves per platform.

Context parallelism over it (Ulysses with the blockwise kernel, ring folding with it) is
checked on 8 virtual devices in tests/unit/test_context_parallel.py.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from wanjax.adapters.jax.attention.xla import XlaAttention
from wanjax.adapters.jax.attention.blockwise import BlockwiseAttention
from wanjax.adapters.jax.attention.cudnn import CudnnAttention, cudnn_takes
from wanjax.adapters.jax.transformer.model import WanTransformer
from wanjax.adapters.jax.transformer.runtime import TransformerRuntime
from wanjax.application.container import build_container
from wanjax.domain.attention import resolve_attention
from wanjax.domain.attention_call import CROSS, AttentionCall
from wanjax.domain.config import GenerationConfig
from wanjax.domain.errors import ConfigError
from wanjax.domain.specs import TransformerSpec

# fp32: the same fp32 sums in another order (per block, rescaled by the running max);
# measured max |diff| 6e-7 over CASES on outputs of magnitude ~1. The bound.
FP32_ATOL = 1e-5
# bf16 in and out: probabilities rounded to bf16 per block vs once; one bf16 ulp in [1, 2) is 7.8e-3.
BF16_ATOL = 2e-2
BLOCKS = dict(block_q=16, block_k=32)  # several blocks, and a ragged last one, at these lengths

CASES = {  # name: (T, S, N, H, key lengths or None)
    "self, one block": (12, 12, 2, 16, None),
    "self, odd lengths over several blocks": (37, 37, 3, 16, None),
    "cross: text keys": (53, 41, 2, 8, None),
    "cross: one key": (29, 1, 1, 8, None),
    "cross: CLIP's 257 image tokens": (40, 257, 2, 16, None),
    "key padding inside a block": (33, 45, 2, 16, (45, 7)),
    "key padding across blocks": (33, 100, 2, 8, (70, 33)),
}
CALL = AttentionCall(kind=CROSS)  # T != S in most cases
BF16_CASES = ("self, odd lengths over several blocks", "key padding across blocks")  # the dtype path is shared


def qkv(t: int, s: int, n: int, h: int, dtype=jnp.float32, seed: int = 0) -> tuple[jax.Array, ...]:
    rng = np.random.default_rng(seed)
    return tuple(jnp.asarray(rng.standard_normal((2, length, n, h)), dtype) for length in (t, s, s))


def max_error(a: jax.Array, b: jax.Array) -> float:
    return float(jnp.max(jnp.abs(a.astype(jnp.float32) - b.astype(jnp.float32))))


@pytest.mark.parametrize("case", list(CASES))
def test_equals_xla_fp32(case):
    _check_equals_xla(case, jnp.float32, FP32_ATOL)


@pytest.mark.parametrize("case", BF16_CASES)
def test_equals_xla_bf16(case):
    _check_equals_xla(case, jnp.bfloat16, BF16_ATOL)


def _check_equals_xla(case: str, dtype, atol: float) -> None:
    t, s, n, h, lengths = CASES[case]
    q, k, v = qkv(t, s, n, h, dtype)
    lengths = None if lengths is None else jnp.asarray(lengths, jnp.int32)
    out = jax.jit(functools.partial(BlockwiseAttention(**BLOCKS), call=CALL))(q, k, v, key_value_seq_lengths=lengths)
    reference = jax.nn.dot_product_attention(q, k, v, key_value_seq_lengths=lengths, implementation="xla")
    assert out.shape == q.shape and out.dtype == q.dtype
    assert max_error(out, reference) <= atol


def test_key_padding_ignores_what_lies_past_the_length():
    q, k, v = qkv(9, 40, 2, 8)
    lengths = jnp.asarray([40, 11], jnp.int32)
    garbage = v.at[1, 11:].set(1e4)  # row 1 sees only its first 11 keys
    attend = jax.jit(functools.partial(BlockwiseAttention(**BLOCKS), call=CALL))
    np.testing.assert_array_equal(
        attend(q, k, garbage, key_value_seq_lengths=lengths), attend(q, k, v, key_value_seq_lengths=lengths)
    )


def test_never_allocates_the_logit_matrix():
    """At T = S = 4096 the logits of one row and head are 64 MiB; XLA's reference holds them,
    the blockwise kernel holds one block at a time (the bound is a few blocks' worth)."""
    x = jax.ShapeDtypeStruct((1, 4096, 2, 16), jnp.float32)

    def temp(attend) -> int:
        compiled = jax.jit(attend, static_argnums=3).lower(x, x, x, CALL).compile()
        return compiled.memory_analysis().temp_size_in_bytes

    logits = 4096 * 4096 * 2 * 4  # [B, N, T, S] fp32
    assert temp(XlaAttention()) >= logits  # what the blockwise kernel exists to avoid
    assert temp(BlockwiseAttention(block_q=256, block_k=256)) < logits / 16


TINY = dict(
    num_attention_heads=2, attention_head_dim=8, in_channels=16, out_channels=16, text_dim=32,
    freq_dim=32, ffn_dim=32, num_layers=2, rope_max_seq_len=32,
)  # fmt: skip


def test_i2v_transformer_forward_with_blockwise_equals_xla():
    """Self-attention over 3 x 6 x 5 = 90 tokens, cross-attention over 23 text tokens and over
    19 I2V image tokens, all through the blockwise kernel in several blocks each."""
    image_tokens = 19
    spec = TransformerSpec(**TINY, image_dim=24, added_kv_proj_dim=16)
    rng = np.random.default_rng(1)
    latents = rng.standard_normal((2, 3, 12, 10, 16), np.float32)
    timestep = np.array([999.0, 300.0], np.float32)
    context = rng.standard_normal((2, 23, 32), np.float32)
    kwargs = {"image_context": rng.standard_normal((2, image_tokens, 24), np.float32)}

    def forward(attention) -> np.ndarray:
        runtime = TransformerRuntime(dtype=jnp.float32, param_dtype=jnp.float32, attention=attention)
        model = WanTransformer(spec, runtime, rngs=nnx.Rngs(0))
        return np.asarray(nnx.jit(lambda m, *a, **kw: m(*a, **kw))(model, latents, timestep, context, **kwargs))

    reference = forward(XlaAttention())
    out = forward(BlockwiseAttention(block_q=32, block_k=8))
    assert np.abs(out - reference).max() <= 1e-5 * np.abs(reference).max()


def test_auto_resolves_per_platform_to_a_kernel_without_the_logit_matrix():
    assert resolve_attention("auto", "cpu") == "blockwise"
    assert resolve_attention("auto", "gpu") == "cudnn"
    assert resolve_attention("auto", "tpu") == "pallas"
    assert resolve_attention("xla", "gpu") == "xla"  # a named backend is taken as named
    with pytest.raises(ConfigError, match="auto, xla, blockwise, cudnn, pallas, tokamax"):
        resolve_attention("flash", "cpu")


def test_auto_is_the_default_and_blockwise_here():
    assert GenerationConfig().denoiser.attention == "auto"
    assert isinstance(build_container(GenerationConfig()).attention(), BlockwiseAttention)


def test_cudnn_takes_half_precision_at_wan_head_widths_only():
    half = qkv(4, 4, 2, 128, jnp.bfloat16)
    assert cudnn_takes(*half)
    assert not cudnn_takes(*qkv(4, 4, 2, 128, jnp.float32))  # fp32 goes to the fallback kernel
    assert not cudnn_takes(*qkv(4, 4, 2, 12, jnp.bfloat16))  # not a multiple of 8
    assert not cudnn_takes(*qkv(4, 4, 2, 256, jnp.bfloat16))


def test_cudnn_off_a_gpu_is_a_config_error_naming_the_fix():
    with pytest.raises(ConfigError, match="attention=auto"):
        CudnnAttention()
