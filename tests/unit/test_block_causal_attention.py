"""Frame-block-causal attention (SkyReels-V2 Diffusion Forcing's self-attention) through the
attention port: the XLA and blockwise kernels equal a masked softmax over the mask diffusers'
SkyReels-V2 transformer builds, the blockwise kernel skips the key blocks no query sees, and the
kernels without the structure refuse it by name while tracing, before anything compiles.

Context parallelism with the structure (ring and Ulysses on 8 virtual devices) is checked in
tests/unit/test_context_parallel.py.
"""

import functools
import sys
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch

from wanjax.adapters.jax.attention.blockwise import BlockwiseAttention
from wanjax.adapters.jax.attention.cudnn import CudnnAttention
from wanjax.adapters.jax.attention.pallas import PallasAttention
from wanjax.adapters.jax.attention.sage import pallas_sage_attention
from wanjax.adapters.jax.attention.tokamax import TokamaxAttention
from wanjax.adapters.jax.attention.xla import XlaAttention, structure_mask
from wanjax.domain.attention_call import CROSS, SELF, AttentionCall, FrameBlockCausal
from wanjax.domain.errors import ConfigError, InvalidRequestError

# fp32: a masked softmax summed in another order (blockwise) or by torch; measured ~1e-6.
FP32_ATOL = 1e-5
CASES = {  # name: (token grid (F', H', W'), frames per block)
    "blocks of 2 frames over an odd grid": ((4, 3, 5), 2),
    "one frame a block (frame-causal)": ((5, 2, 3), 1),
    "three frames a block, one token a frame": ((9, 1, 1), 3),
    "one block (every key seen)": ((3, 2, 2), 3),
}
BLOCKS = dict(block_q=7, block_k=5)  # ragged blocks whose edges fall inside frame blocks


def block_causal(grid: tuple[int, int, int], frames_per_block: int) -> AttentionCall:
    return AttentionCall(kind=SELF, grid=grid, structure=FrameBlockCausal(frames_per_block))


def qkv(tokens: int, heads: int = 2, head_dim: int = 8, seed: int = 0) -> tuple[jax.Array, ...]:
    rng = np.random.default_rng(seed)
    return tuple(jnp.asarray(rng.standard_normal((2, tokens, heads, head_dim)), jnp.float32) for _ in range(3))


def diffusers_mask(grid: tuple[int, int, int], frames_per_block: int) -> np.ndarray:
    """The [S, S] boolean mask diffusers' SkyReelsV2Transformer3DModel hands its first block's
    self-attention, for latents of `grid` (patch 1 x 1 x 1), captured from a tiny model."""
    from diffusers.models.transformers.transformer_skyreels_v2 import SkyReelsV2Transformer3DModel

    torch.manual_seed(0)
    model = SkyReelsV2Transformer3DModel(
        patch_size=(1, 1, 1), num_attention_heads=2, attention_head_dim=8, in_channels=4, out_channels=4,
        text_dim=8, freq_dim=8, ffn_dim=8, num_layers=1, num_frame_per_block=frames_per_block,
    ).eval()  # fmt: skip
    seen = []
    model.blocks[0].attn1.register_forward_pre_hook(lambda module, args: seen.append(args[2]))
    with torch.no_grad():
        model(torch.zeros(1, 4, *grid), torch.zeros(1, dtype=torch.long), torch.zeros(1, 3, 8))
    mask = seen[0]
    return None if mask is None else mask.reshape(mask.shape[-2:]).numpy()


def masked_softmax_reference(q: jax.Array, k: jax.Array, v: jax.Array, mask: np.ndarray) -> np.ndarray:
    """torch's SDPA (the attention diffusers dispatches to) with a boolean [T, S] mask."""
    to_torch = lambda x: torch.from_numpy(np.array(x)).transpose(1, 2)  # noqa: E731  [B, N, L, H]
    out = torch.nn.functional.scaled_dot_product_attention(*map(to_torch, (q, k, v)), attn_mask=torch.from_numpy(np.array(mask)))
    return out.transpose(1, 2).numpy()


@pytest.mark.parametrize("case", [c for c in CASES if CASES[c][1] > 1])
def test_the_structure_is_the_mask_diffusers_builds(case):
    grid, frames = CASES[case]
    tokens = int(np.prod(grid))
    ours = np.asarray(structure_mask(block_causal(grid, frames), tokens, tokens))[0, 0]
    np.testing.assert_array_equal(ours, diffusers_mask(grid, frames))


@pytest.mark.parametrize("kernel", [XlaAttention(), XlaAttention(key_alignment=16), BlockwiseAttention(**BLOCKS)])
@pytest.mark.parametrize("case", list(CASES))
def test_kernels_equal_the_masked_softmax(case, kernel):
    grid, frames = CASES[case]
    call = block_causal(grid, frames)
    q, k, v = qkv(int(np.prod(grid)))
    tokens = q.shape[1]
    mask = np.asarray(structure_mask(call, tokens, tokens))[0, 0]
    out = jax.jit(functools.partial(kernel, call=call))(q, k, v)
    assert np.abs(np.asarray(out) - masked_softmax_reference(q, k, v, mask)).max() <= FP32_ATOL


def test_a_query_ignores_the_keys_of_later_frame_blocks():
    call = block_causal((4, 2, 2), 2)  # 8 tokens a block
    q, k, v = qkv(16)
    later = v.at[:, 8:].set(1e4)
    for kernel in (XlaAttention(), BlockwiseAttention(**BLOCKS)):
        attend = jax.jit(functools.partial(kernel, call=call))
        np.testing.assert_array_equal(attend(q, k, later)[:, :8], attend(q, k, v)[:, :8])
        assert not np.allclose(attend(q, k, later)[:, 8:], attend(q, k, v)[:, 8:])


def test_blockwise_skips_the_key_blocks_no_query_sees():
    """Keys 8..15 are NaN: a key block merely masked would still multiply them by probability 0
    (NaN); a skipped block never reads them, so the first frame block's queries stay exact."""
    call = block_causal((4, 2, 2), 2)
    q, k, v = qkv(16)
    poisoned = [x.at[:, 8:].set(jnp.nan) for x in (k, v)]
    attend = jax.jit(functools.partial(BlockwiseAttention(block_q=8, block_k=4), call=call))
    first = np.asarray(attend(q, *poisoned)[:, :8])
    assert np.isfinite(first).all()
    np.testing.assert_allclose(first, np.asarray(attend(q, k, v)[:, :8]), atol=FP32_ATOL)


def test_a_kernel_without_the_structure_is_refused_by_name_while_tracing():
    call = block_causal((4, 2, 2), 2)
    x = jax.ShapeDtypeStruct((1, 16, 2, 8), jnp.float32)
    with pytest.raises(ConfigError) as error:
        jax.jit(PallasAttention(), static_argnums=3).trace(x, x, x, call)  # traced only: nothing lowers
    message = str(error.value)
    assert "attention=pallas does not support frame-block-causal attention" in message
    assert "over the token grid (4, 2, 2) in blocks of 2 latent frames" in message
    assert "choose attention=xla or attention=blockwise" in message


@pytest.mark.parametrize("name", ["cudnn", "tokamax", "pallas", "pallas_sage"])
def test_every_kernel_without_the_structure_refuses_it_before_any_array_exists(name, monkeypatch):
    """`check` is what a preflight calls; cuDNN and tokamax are built as on a GPU (a stand-in
    tokamax module), since they refuse a CPU when built."""
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    monkeypatch.setitem(sys.modules, "tokamax", types.ModuleType("tokamax"))
    kernels = {"cudnn": CudnnAttention, "tokamax": TokamaxAttention, "pallas": PallasAttention}
    kernel = {**kernels, "pallas_sage": pallas_sage_attention}[name]()
    kernel.check(AttentionCall(kind=CROSS, grid=(4, 2, 2), layer=3))  # what every kernel takes
    with pytest.raises(ConfigError, match=f"attention={name} does not support frame-block-causal attention"):
        kernel.check(block_causal((4, 2, 2), 2))


def test_the_call_is_static_and_states_what_it_asks():
    call = block_causal((4, 2, 2), 2)
    assert call == block_causal((4, 2, 2), 2) and hash(call) == hash(block_causal((4, 2, 2), 2))
    assert call.features == (SELF, "frame-block-causal")
    assert call.as_cross() == AttentionCall(kind=CROSS, grid=(4, 2, 2))
    assert call.at_layer(5).layer == 5 and call.at_layer(5).structure == call.structure


def test_frames_the_blocks_do_not_divide_are_refused():
    with pytest.raises(InvalidRequestError, match="5 latent frames into blocks of causal_block_size=2"):
        block_causal((5, 2, 2), 2)


@pytest.mark.parametrize("frames", [0, -1, 1.5, True])
def test_a_block_is_a_positive_whole_number_of_frames(frames):
    with pytest.raises(ConfigError, match="causal_block_size"):
        FrameBlockCausal(frames)


def test_only_self_attention_over_a_grid_takes_a_structure():
    with pytest.raises(ValueError, match="self-attention over a token grid"):
        AttentionCall(kind=CROSS, grid=(4, 2, 2), structure=FrameBlockCausal(2))
    with pytest.raises(ValueError, match="self-attention over a token grid"):
        AttentionCall(kind=SELF, structure=FrameBlockCausal(2))
