"""Context-parallel self-attention (Ulysses, ring) on 8 virtual CPU devices equals unsharded
attention, also frame-block-causal, moves data with the collectives its design names and never
all-gathers q/k/v; a tiny Wan transformer with it as its self-attention equals the plain one;
a call it cannot run (cross-attention; a structure Ulysses' local kernel lacks) is refused by name.

JAX fixes its device count when it starts, so the multi-device work runs once, in the
8-device process (tests/eight_devices.py), which imports this file and returns `_report()`
as JSON (errors, output differences, facts about the compiled HLO); the tests assert on it.
"""

from __future__ import annotations

import functools
import re
import traceback
from typing import Any

import numpy as np
import pytest

from wanjax.domain.attention_call import CROSS, SELF, AttentionCall, FrameBlockCausal
from wanjax.domain.sharding import MESH_AXES

# fp32: Ulysses runs the same kernel on the same keys (measured max |diff| 0); ring sums the
# keys per block, rescaled by the running max, in another order (measured 8e-7 on outputs of
# magnitude ~1). A wrong block order, scale or head mapping gives differences of order 0.1.
FP32_ATOL = 1e-5
# bf16 inputs, bf16 output on both sides: probabilities are rounded to bf16 before the PV
# matmul at different points; one bf16 ulp in [1, 2) is 7.8e-3.
BF16_ATOL = 2e-2
# The tiny transformer forward (fp32, 2 blocks): relative to max |reference| (~3), as the
# parity tests measure it; differences are attention's rounding carried through the blocks.
FORWARD_RTOL = 1e-5

MESHES = {  # name -> sizes in MESH_AXES order
    "8 context": (1, 1, 1, 8),
    "2 data x 4 context": (2, 1, 1, 4),
    "4 context x 2 tensor": (1, 1, 2, 4),
    "2 fsdp x 2 tensor x 2 context": (1, 2, 2, 2),
    "8 data (context 1)": (8, 1, 1, 1),
}
VARIANTS = ("ulysses", "ring")
# The attention checks also fold each ring block in chunks of 4 keys and 4 queries (the 9 per
# device padded to 12, the padding masked), and run Ulysses over the blockwise kernel (attention=auto
# on CPU) with blocks of 4 queries and 4 keys of the 72 each device gathers.
ATTENTION_VARIANTS = (*VARIANTS, "ring, 4-token chunks", "ulysses, blockwise")
# q/k/v [B, S, N, H]: S = 72 is 9 tokens per device on 8 context devices (odd), H = 12.
QKV_SHAPE = (8, 72, 8, 12)
BF16_MESHES = ("4 context x 2 tensor",)  # the dtype path does not depend on the mesh
FORWARD_LATENTS = (2, 2, 8, 8, 16)  # [B, F, H, W, C]: 2 x 4 x 4 = 32 tokens with patch (1, 2, 2)
FORWARD_MESHES = ("8 context", "2 data x 4 context", "4 context x 2 tensor")
SELF_CALL = AttentionCall(kind=SELF)
CROSS_CALL = AttentionCall(kind=CROSS)
# QKV_SHAPE's 72 tokens as a (6, 3, 4) grid in blocks of 2 frames: 24 tokens a block, so block
# edges fall inside the 9-token shards of 8 context devices.
BLOCK_CAUSAL = AttentionCall(kind=SELF, grid=(6, 3, 4), structure=FrameBlockCausal(2))
BLOCK_CAUSAL_MESHES = ("8 context", "2 data x 4 context", "4 context x 2 tensor")


# ---- in the 8-device process ----------------------------------------------------------------


def _mesh(name: str):
    import jax
    from jax.sharding import Mesh

    return Mesh(np.array(jax.devices()).reshape(MESHES[name]), MESH_AXES)


def _attention(variant: str, mesh):
    from wanjax.adapters.jax.attention.blockwise import BlockwiseAttention
    from wanjax.adapters.jax.attention.context_parallel import RingAttention, UlyssesAttention

    if variant == "ulysses":
        return UlyssesAttention(mesh)
    if variant == "ulysses, blockwise":
        return UlyssesAttention(mesh, BlockwiseAttention(block_q=4, block_k=4))
    if variant == "ring, 4-token chunks":
        return RingAttention(mesh, key_chunk=4, query_chunk=4)
    return RingAttention(mesh, key_chunk=None)


def _jitted(kernel, call: AttentionCall = SELF_CALL):
    """`kernel` with its static call bound, under jit."""
    import jax

    return jax.jit(functools.partial(kernel, call=call))


def _collectives(hlo: str) -> dict[str, Any]:
    """Which collectives the compiled HLO runs, and the result shapes of its all-gathers."""
    gathered = re.findall(r"= \w+\[([\d,]*)\]\S* all-gather(?:-start)?\(", hlo)
    ops = {op: op in hlo for op in ("all-to-all", "collective-permute", "all-gather", "all-reduce")}
    return {**ops, "gathered": [[int(n) for n in dims.split(",")] for dims in gathered]}


def _measure_attention(
    dtype_name: str, mesh_names: tuple[str, ...], call: AttentionCall = SELF_CALL
) -> dict[str, Any]:
    """Per mesh and variant: max |sharded - XlaAttention| of `call` and the collectives in the
    compiled HLO, q/k/v placed in the layout the transformer's activations have."""
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding

    from wanjax.adapters.jax.attention.xla import XlaAttention
    from wanjax.adapters.jax.attention.context_parallel import QKV_SPEC

    rng = np.random.default_rng(0)
    q, k, v = (jnp.asarray(rng.standard_normal(QKV_SHAPE, np.float32), dtype_name) for _ in range(3))
    reference = np.asarray(_jitted(XlaAttention(), call)(q, k, v), np.float32)
    report = {}
    for mesh_name in mesh_names:
        mesh = _mesh(mesh_name)
        placed = [jax.device_put(x, NamedSharding(mesh, QKV_SPEC)) for x in (q, k, v)]
        for variant in ATTENTION_VARIANTS:
            attend = _jitted(_attention(variant, mesh), call)
            out = attend(*placed)
            report[f"{mesh_name} / {variant}"] = {
                "max_diff": float(np.abs(np.asarray(out, np.float32) - reference).max()),
                "dtype": str(out.dtype),
                "out_spec_is_input_spec": out.sharding.spec == QKV_SPEC,
                **_collectives(attend.lower(*placed).compile().as_text()),
            }
    return report


def _error(call) -> dict[str, str] | None:
    try:
        call()
    except Exception as error:  # noqa: BLE001  (the report names whatever was raised)
        return {"type": type(error).__name__, "message": str(error)}
    return None


def _measure_errors() -> dict[str, Any]:
    """The error each misfit of mesh and shapes raises (None: none raised)."""
    import jax
    import jax.numpy as jnp
    from jax.sharding import Mesh

    from wanjax.adapters.jax.attention.context_parallel import UlyssesAttention
    from wanjax.adapters.jax.attention.pallas import PallasAttention

    def attend(variant: str, mesh_name: str, shape: tuple[int, int, int, int], call: AttentionCall = SELF_CALL):
        x = jnp.zeros(shape, jnp.float32)
        return lambda: _jitted(_attention(variant, _mesh(mesh_name)), call)(x, x, x)

    over_pallas = UlyssesAttention(_mesh("8 context"), PallasAttention())
    x = jnp.zeros(QKV_SHAPE, jnp.float32)

    two_axes = Mesh(np.array(jax.devices()).reshape(2, 4), ("data", "context"))
    return {
        # 6 heads over context 4 x tensor 2 = 8; ring needs only tensor 2 | 6
        "ulysses heads": _error(attend("ulysses", "4 context x 2 tensor", (2, 8, 6, 4))),
        "ring heads ok": _error(attend("ring", "4 context x 2 tensor", (2, 8, 6, 4))),
        "ring heads": _error(attend("ring", "4 context x 2 tensor", (2, 8, 3, 4))),
        "ulysses sequence": _error(attend("ulysses", "8 context", (1, 12, 8, 4))),
        "ring sequence": _error(attend("ring", "8 context", (1, 12, 8, 4))),
        "mesh axes": _error(lambda: _attention("ring", two_axes)),
        **{f"{variant} cross": _error(attend(variant, "8 context", QKV_SHAPE, CROSS_CALL)) for variant in VARIANTS},
        "ulysses over pallas, block-causal": _error(lambda: _jitted(over_pallas, BLOCK_CAUSAL)(x, x, x)),
        **{f"{variant} whole batch": _whole_batch_difference(variant) for variant in VARIANTS},
    }


def _whole_batch_difference(variant: str) -> float:
    """max |sharded - XlaAttention| for a batch of 1 on 2 data x 4 context: data does not divide
    it (a CFG-cache step's conditional rows alone), so every data device attends it whole."""
    import jax
    import jax.numpy as jnp

    from wanjax.adapters.jax.attention.xla import XlaAttention

    rng = np.random.default_rng(1)
    q, k, v = (jnp.asarray(rng.standard_normal((1, 8, 8, 4), dtype=np.float32)) for _ in range(3))
    out = _jitted(_attention(variant, _mesh("2 data x 4 context")))(q, k, v)
    return float(np.abs(np.asarray(out) - np.asarray(XlaAttention()(q, k, v, SELF_CALL))).max())


def _tiny_spec():
    from wanjax.domain.specs import TransformerSpec

    return TransformerSpec(
        num_attention_heads=8, attention_head_dim=8, in_channels=16, out_channels=16, text_dim=32,
        freq_dim=32, ffn_dim=64, num_layers=2, rope_max_seq_len=32,
    )  # fmt: skip


def _measure_forward() -> dict[str, Any]:
    """A tiny Wan transformer (scanned blocks) whose self-attention is context-parallel, its
    parameters replicated and its tokens pinned to the default activation layout (rows over
    data x fsdp, tokens over context), against the same weights run plainly on one device:
    max |diff| / max |reference| and the collectives of the compiled forward."""
    import jax
    import jax.numpy as jnp
    from flax import nnx

    from wanjax.adapters.jax.sharding.activations import ActivationSharding
    from wanjax.adapters.jax.transformer.model import WanTransformer
    from wanjax.adapters.jax.transformer.runtime import TransformerRuntime
    from wanjax.domain.sharding import DEFAULT_RULES

    spec = _tiny_spec()
    rng = np.random.default_rng(1)
    latents = rng.standard_normal(FORWARD_LATENTS, np.float32)  # [B, F, H, W, C]
    timestep = np.array([999.0, 500.0], np.float32)  # [B]
    context = rng.standard_normal((2, 5, 32), np.float32)  # [B, L, text_dim]
    plain = WanTransformer(spec, TransformerRuntime(dtype=jnp.float32, param_dtype=jnp.float32), rngs=nnx.Rngs(0))
    reference = np.asarray(nnx.jit(lambda m, *a: m(*a))(plain, latents, timestep, context))
    report = {}
    for mesh_name in FORWARD_MESHES:
        mesh = _mesh(mesh_name)
        for variant in VARIANTS:
            runtime = TransformerRuntime(
                dtype=jnp.float32,
                param_dtype=jnp.float32,
                self_attention=_attention(variant, mesh),
                activation_sharding=ActivationSharding(mesh, DEFAULT_RULES),
            )
            model = WanTransformer(spec, runtime, rngs=nnx.Rngs(0))
            nnx.update(model, nnx.state(plain))
            graphdef, state = nnx.split(model)

            @jax.jit
            def forward(state, latents, timestep, context):
                return nnx.merge(graphdef, state)(latents, timestep, context)

            args = (state, latents, timestep, context)
            out = np.asarray(forward(*args))
            report[f"{mesh_name} / {variant}"] = {
                "relative_diff": float(np.abs(out - reference).max() / np.abs(reference).max()),
                **_collectives(forward.lower(*args).compile().as_text()),
            }
    return report


def _report() -> dict[str, Any]:
    import jax

    assert len(jax.devices()) == 8, jax.devices()
    parts = {
        "fp32": lambda: _measure_attention("float32", tuple(MESHES)),
        "bf16": lambda: _measure_attention("bfloat16", BF16_MESHES),
        "block-causal": lambda: _measure_attention("float32", BLOCK_CAUSAL_MESHES, BLOCK_CAUSAL),
    }
    parts |= {"errors": _measure_errors, "forward": _measure_forward}
    report = {}
    for name, measure in parts.items():  # one failing part still reports the others
        try:
            report[name] = measure()
        except Exception:  # noqa: BLE001
            report[name] = {"crashed": traceback.format_exc()}
    return report


# ---- the test side ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def report(eight_devices) -> dict[str, Any]:
    return eight_devices.call(__file__, "_report")


def _part(report: dict[str, Any], name: str) -> dict[str, Any]:
    part = report[name]
    assert "crashed" not in part, part.get("crashed")
    return part


CASES = [(mesh, variant) for mesh in MESHES for variant in ATTENTION_VARIANTS]


@pytest.mark.parametrize("mesh, variant", CASES)
def test_equals_unsharded_attention_fp32(report, mesh, variant):
    case = _part(report, "fp32")[f"{mesh} / {variant}"]
    assert case["dtype"] == "float32" and case["out_spec_is_input_spec"]
    assert case["max_diff"] <= FP32_ATOL, case


@pytest.mark.parametrize("mesh, variant", [(m, v) for m in BF16_MESHES for v in ATTENTION_VARIANTS])
def test_equals_unsharded_attention_bf16(report, mesh, variant):
    case = _part(report, "bf16")[f"{mesh} / {variant}"]
    assert case["dtype"] == "bfloat16"
    assert case["max_diff"] <= BF16_ATOL, case


@pytest.mark.parametrize("mesh, variant", [(m, v) for m in BLOCK_CAUSAL_MESHES for v in ATTENTION_VARIANTS])
def test_frame_block_causal_equals_unsharded_masked_attention(report, mesh, variant):
    case = _part(report, "block-causal")[f"{mesh} / {variant}"]
    assert case["out_spec_is_input_spec"] and case["max_diff"] <= FP32_ATOL, case


def test_cross_attention_and_unsupported_local_structures_are_refused_by_name(report):
    errors = _part(report, "errors")
    for variant in VARIANTS:
        error = errors[f"{variant} cross"]
        assert error["type"] == "ConfigError", error
        assert f"context_parallel={variant} does not support cross attention" in error["message"]
    error = errors["ulysses over pallas, block-causal"]
    assert error["type"] == "ConfigError", error
    assert "attention=pallas does not support frame-block-causal attention" in error["message"]
    assert "attention=xla or attention=blockwise" in error["message"]


@pytest.mark.parametrize("mesh, variant", CASES)
def test_moves_data_with_its_own_collective_and_never_gathers(report, mesh, variant):
    case = _part(report, "fp32")[f"{mesh} / {variant}"]
    split = MESHES[mesh][MESH_AXES.index("context")] > 1
    ulysses = variant.startswith("ulysses")
    own, other = ("all-to-all", "collective-permute") if ulysses else ("collective-permute", "all-to-all")
    assert case[own] == split, case  # a context axis of 1 is a no-op
    assert not case[other] and not case["all-gather"] and not case["all-reduce"], case


def test_indivisible_heads_name_the_mesh_and_the_fix(report):
    errors = _part(report, "errors")
    ulysses = errors["ulysses heads"]
    assert ulysses["type"] == "ConfigError"
    assert "6 attention heads" in ulysses["message"] and "context=4 x tensor=2 = 8" in ulysses["message"]
    assert "ring" in ulysses["message"]
    assert errors["ring heads ok"] is None  # ring splits the heads over tensor only
    ring = errors["ring heads"]
    assert ring["type"] == "ConfigError" and "3 attention heads over tensor=2," in ring["message"]


def test_indivisible_sequence_names_the_sizes(report):
    errors = _part(report, "errors")
    for variant in VARIANTS:
        error = errors[f"{variant} sequence"]
        assert error["type"] == "InvalidRequestError" and "12 query tokens over context=8" in error["message"]


def test_a_batch_the_data_axes_do_not_divide_is_attended_whole_on_each(report):
    errors = _part(report, "errors")
    for variant in VARIANTS:
        assert errors[f"{variant} whole batch"] <= 1e-5  # fp32, as the sharded cases


def test_mesh_without_the_named_axes_is_a_config_error(report):
    error = _part(report, "errors")["mesh axes"]
    assert error["type"] == "ConfigError" and "missing ['fsdp', 'tensor']" in error["message"]


@pytest.mark.parametrize("mesh, variant", [(m, v) for m in FORWARD_MESHES for v in VARIANTS])
def test_transformer_with_context_parallel_self_attention_equals_plain(report, mesh, variant):
    case = _part(report, "forward")[f"{mesh} / {variant}"]
    assert case["relative_diff"] <= FORWARD_RTOL, case
    own = "all-to-all" if variant == "ulysses" else "collective-permute"
    assert case[own], case
    # Tokens stay split from the patch embedding to the head: nothing but (pieces of) the
    # velocity output [B, F, H, W, C] is gathered, to return it whole; never q/k/v [B, S, N, H]
    # nor the token stream [B, S, D]. (With tensor > 1 the replicated output projection sums
    # its head halves: an all-reduce, not a gather.)
    assert all(len(dims) == 5 and dims[2:] == list(FORWARD_LATENTS[2:]) for dims in case["gathered"]), case


def _one_device_mesh():
    import jax
    from jax.sharding import Mesh

    return Mesh(np.array(jax.devices()[:1]).reshape(1, 1, 1, 1), MESH_AXES)


def test_key_alignment_is_the_local_kernels_for_ulysses_and_none_for_ring():
    from wanjax.adapters.jax.attention.xla import XlaAttention
    from wanjax.adapters.jax.attention.context_parallel import RingAttention, UlyssesAttention

    assert UlyssesAttention(_one_device_mesh(), XlaAttention(key_alignment=128)).key_alignment == 128
    assert RingAttention(_one_device_mesh()).key_alignment == 1


def test_ring_chunks_must_be_positive():
    from wanjax.adapters.jax.attention.context_parallel import RingAttention
    from wanjax.domain.errors import ConfigError

    with pytest.raises(ConfigError, match="key_chunk=0: must be a positive token count"):
        RingAttention(_one_device_mesh(), key_chunk=0)
    with pytest.raises(ConfigError, match="query_chunk=-1: must be a positive token count"):
        RingAttention(_one_device_mesh(), query_chunk=-1)

