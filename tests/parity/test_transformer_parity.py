"""wanjax's JAX Wan transformer against diffusers' WanTransformer3DModel (the reference).

Tiny random diffusers models are saved with `save_pretrained` and read back with
`safetensors.numpy`, so the loader sees the real on-disk names and layouts.

Tolerance: max|ours - ref| <= 1e-5 * max|ref|. Both sides run in fp32; what remains
is summation order in matmuls/softmax and last-ulp differences of exp/sin/cos/tanh:
measured 2.7e-7 relative, 1.8e-6 with freq_dim=256 (a 1-ulp difference in a sinusoid
frequency, times t=999, moves the time embedding by ~3e-5). Real mistakes land well
above: exact instead of tanh GELU gives 6e-5, RoPE left off k gives 1e-1.
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest
from diffusers import WanTransformer3DModel
from flax import nnx

from transformer_models import SavedReference, assert_close, runtime

from wanjax.adapters.jax.transformer.model import WanTransformer
from wanjax.adapters.jax.transformer.weights import export_transformer_weights, load_transformer
from wanjax.domain.errors import CheckpointError
from wanjax.domain.specs import TransformerSpec

RELATIVE_TOLERANCE = 1e-5

# name -> (diffusers config, latent (F, H, W), context tokens)
CONFIGS = {
    "d8-l2-f1": (
        dict(num_attention_heads=2, attention_head_dim=8, in_channels=4, out_channels=4,
             text_dim=16, freq_dim=16, ffn_dim=32, num_layers=2),
        (1, 6, 10), 7,
    ),
    "d12-l3-f3-no-cross-norm": (
        dict(num_attention_heads=2, attention_head_dim=12, in_channels=16, out_channels=8,
             text_dim=32, freq_dim=256, ffn_dim=32, num_layers=3, cross_attn_norm=False),
        (3, 4, 6), 12,
    ),
    "d16-l2-f5-odd-freq": (
        dict(num_attention_heads=2, attention_head_dim=16, in_channels=8, out_channels=16,
             text_dim=24, freq_dim=17, ffn_dim=32, num_layers=2),
        (5, 6, 10), 9,
    ),
    "d8-l2-f4-patch222": (
        dict(num_attention_heads=2, attention_head_dim=8, in_channels=4, out_channels=4,
             text_dim=16, freq_dim=32, ffn_dim=32, num_layers=2, patch_size=(2, 2, 2)),
        (4, 6, 10), 8,
    ),
}  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Case:
    spec: TransformerSpec
    tensors: dict[str, np.ndarray]
    latents: np.ndarray  # [B, F, H, W, C_in]
    timestep: np.ndarray  # [B]
    context: np.ndarray  # [B, L, text_dim]
    reference: np.ndarray  # [B, F, H, W, C_out]


@pytest.fixture(scope="module", params=list(CONFIGS))
def case(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Case:
    config, (frames, height, width), tokens = CONFIGS[request.param]
    saved = SavedReference(config, tmp_path_factory.mktemp(request.param))
    spec = saved.spec

    rng = np.random.default_rng(0)
    latents = rng.standard_normal((2, frames, height, width, spec.in_channels), dtype=np.float32)
    timestep = np.array([999.0, 500.5], np.float32)
    context = rng.standard_normal((2, tokens, spec.text_dim), dtype=np.float32)
    return Case(
        spec=spec,
        tensors=saved.tensors,
        latents=latents,
        timestep=timestep,
        context=context,
        reference=saved.forward(latents, timestep, context),
    )


@pytest.mark.parametrize("scan_layers", [True, False], ids=["scan", "loop"])
def test_matches_diffusers(case: Case, scan_layers: bool) -> None:
    model = load_transformer(case.spec, runtime(scan_layers), case.tensors)
    forward = nnx.jit(lambda m, latents, t, ctx: m(latents, t, ctx))
    out = np.asarray(forward(model, case.latents, case.timestep, case.context))

    assert_close(out, case.reference, RELATIVE_TOLERANCE)


@pytest.mark.parametrize("scan_layers", [True, False], ids=["scan", "loop"])
def test_export_inverts_load(case: Case, scan_layers: bool) -> None:
    model = load_transformer(case.spec, runtime(scan_layers), case.tensors)
    exported = export_transformer_weights(model)

    assert set(exported) == set(case.tensors)
    for name, tensor in case.tensors.items():
        assert exported[name].dtype == tensor.dtype, name
        np.testing.assert_array_equal(exported[name], tensor, err_msg=name)


def test_layouts_share_random_init() -> None:
    spec = TransformerSpec.from_diffusers_config(CONFIGS["d8-l2-f1"][0])
    scanned, looped = (
        export_transformer_weights(WanTransformer(spec, runtime(scan), rngs=nnx.Rngs(0)))
        for scan in (True, False)
    )
    assert scanned.keys() == looped.keys()
    for name in scanned:
        np.testing.assert_array_equal(scanned[name], looped[name], err_msg=name)


def checkpoint_error(case: Case, tensors: dict[str, np.ndarray]) -> str:
    with pytest.raises(CheckpointError) as raised:
        load_transformer(case.spec, runtime(True), tensors)
    return str(raised.value)


@pytest.mark.parametrize("case", ["d8-l2-f1"], indirect=True)
def test_missing_tensor_is_named(case: Case) -> None:
    tensors = dict(case.tensors)
    del tensors["blocks.1.attn2.norm_k.weight"]
    assert "'blocks.1.attn2.norm_k.weight'" in checkpoint_error(case, tensors)


@pytest.mark.parametrize("case", ["d8-l2-f1"], indirect=True)
def test_unexpected_tensor_is_named(case: Case) -> None:
    tensors = {**case.tensors, "blocks.0.attn1.norm_added_q.weight": np.ones(16, np.float32)}
    assert "'blocks.0.attn1.norm_added_q.weight'" in checkpoint_error(case, tensors)


@pytest.mark.parametrize("case", ["d8-l2-f1"], indirect=True)
def test_shape_mismatch_names_tensor_and_shapes(case: Case) -> None:
    name = "condition_embedder.time_proj.weight"  # [6 * inner_dim, inner_dim] = [96, 16]
    tensors = {**case.tensors, name: np.zeros((96, 17), np.float32)}
    message = checkpoint_error(case, tensors)
    assert re.search(rf"'{re.escape(name)}'.*\(96, 17\).*\(96, 16\)", message), message
