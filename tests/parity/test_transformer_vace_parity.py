"""The Wan 2.1 VACE transformer against diffusers' WanVACETransformer3DModel, on tiny random
models written by `save_pretrained`: control latents (as many frames as the latents, or
fewer: diffusers pads their tokens with zeros), with and without per-layer control scales,
scanned and looped layers, the KV cache, and the VACE weight names.

Tolerance: max|ours - ref| <= 1e-5 * max|ref| in fp32, as the base transformer's parity.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from flax import nnx

from transformer_models import SavedReference, assert_close, runtime

from wanjax.adapters.jax.transformer.weights import export_transformer_weights, load_transformer
from wanjax.domain.errors import CheckpointError
from wanjax.domain.specs import TransformerSpec

RELATIVE_TOLERANCE = 1e-5
BASE = dict(
    num_attention_heads=2, attention_head_dim=8, in_channels=4, out_channels=4, text_dim=16,
    freq_dim=16, ffn_dim=32, num_layers=5, vace_layers=[0, 2, 3], vace_in_channels=12,
)  # fmt: skip

# name -> (diffusers config, latent (F, H, W), control frames)
CONFIGS = {
    "l5-v3": (BASE, (2, 4, 6), 2),
    "l4-v2-no-cross-norm-f256-short-control": (
        {**BASE, "num_layers": 4, "vace_layers": [0, 3], "cross_attn_norm": False, "freq_dim": 256},
        (3, 4, 4),
        2,
    ),
}


@dataclasses.dataclass(frozen=True)
class Case:
    saved: SavedReference
    spec: TransformerSpec
    latents: np.ndarray  # [B, F, H, W, C_in]
    timestep: np.ndarray  # [B]
    context: np.ndarray  # [B, L, text_dim]
    control: np.ndarray  # [B, Fc, H, W, vace_in_channels]


@pytest.fixture(scope="module", params=list(CONFIGS))
def case(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Case:
    config, (frames, height, width), control_frames = CONFIGS[request.param]
    saved = SavedReference(config, tmp_path_factory.mktemp(request.param), "WanVACETransformer3DModel")
    spec = saved.spec
    rng = np.random.default_rng(0)
    return Case(
        saved=saved,
        spec=spec,
        latents=rng.standard_normal((2, frames, height, width, spec.in_channels), dtype=np.float32),
        timestep=np.array([999.0, 500.5], np.float32),
        context=rng.standard_normal((2, 7, spec.text_dim), dtype=np.float32),
        control=rng.standard_normal((2, control_frames, height, width, spec.vace_in_channels), dtype=np.float32),
    )


def reference(case: Case, scale: np.ndarray | None) -> np.ndarray:
    control = case.control.transpose(0, 4, 1, 2, 3).copy()  # diffusers: [B, C, F, H, W]
    kwargs = {"control_hidden_states": control}
    if scale is not None:
        kwargs["control_hidden_states_scale"] = scale
    return case.saved.forward(case.latents, case.timestep, case.context, **kwargs)


def scales(case: Case) -> np.ndarray:
    return np.linspace(0.5, 1.5, len(case.spec.vace_layers), dtype=np.float32)


@pytest.mark.parametrize("scaled", [False, True], ids=["unscaled", "per-layer-scale"])
@pytest.mark.parametrize("scan_layers", [True, False], ids=["scan", "loop"])
def test_matches_diffusers(case: Case, scan_layers: bool, scaled: bool) -> None:
    scale = scales(case) if scaled else None
    model = load_transformer(case.spec, runtime(scan_layers), case.saved.tensors)
    forward = nnx.jit(lambda m, x, t, ctx, c, s: m(x, t, ctx, extensions={"vace": {"control": c, "scale": s}}))
    out = np.asarray(forward(model, case.latents, case.timestep, case.context, case.control, scale))

    assert_close(out, reference(case, scale), RELATIVE_TOLERANCE)


@pytest.mark.parametrize("case", ["l5-v3"], indirect=True)
def test_kv_cache_gives_the_same_velocity(case: Case) -> None:
    model = load_transformer(case.spec, runtime(True), case.saved.tensors)
    cache = model.cross_attention_kv(case.context)
    assert cache.extensions["vace"].text_k.shape[0] == len(case.spec.vace_layers)
    cached = np.asarray(model(case.latents, case.timestep, cache=cache, extensions=_control(case.control)))

    assert_close(cached, reference(case, None), RELATIVE_TOLERANCE)


@pytest.mark.parametrize("case", ["l5-v3"], indirect=True)
def test_zero_scale_leaves_the_base_model(case: Case) -> None:
    """With every hint scaled by 0 the VACE branch adds nothing: the base model's velocity."""
    model = load_transformer(case.spec, runtime(True), case.saved.tensors)
    zero = np.zeros(len(case.spec.vace_layers), np.float32)
    off = np.asarray(model(case.latents, case.timestep, case.context, extensions=_control(case.control, zero)))
    on = np.asarray(model(case.latents, case.timestep, case.context, extensions=_control(case.control)))

    assert_close(off, reference(case, zero), RELATIVE_TOLERANCE)
    assert np.abs(on - off).max() > 1e-2 * np.abs(off).max()


@pytest.mark.parametrize("scan_layers", [True, False], ids=["scan", "loop"])
def test_export_inverts_load(case: Case, scan_layers: bool) -> None:
    exported = export_transformer_weights(load_transformer(case.spec, runtime(scan_layers), case.saved.tensors))

    assert set(exported) == set(case.saved.tensors)
    for name, tensor in case.saved.tensors.items():
        np.testing.assert_array_equal(exported[name], tensor, err_msg=name)


@pytest.mark.parametrize("case", ["l5-v3"], indirect=True)
def test_missing_vace_tensor_is_named(case: Case) -> None:
    tensors = dict(case.saved.tensors)
    del tensors["vace_blocks.2.proj_out.weight"]
    with pytest.raises(CheckpointError, match=r"'vace_blocks\.2\.proj_out\.weight'"):
        load_transformer(case.spec, runtime(True), tensors)


@pytest.mark.parametrize("case", ["l5-v3"], indirect=True)
def test_control_must_fit(case: Case) -> None:
    model = load_transformer(case.spec, runtime(True), case.saved.tensors)
    with pytest.raises(ValueError, match="needs control latents"):
        model(case.latents, case.timestep, case.context)
    with pytest.raises(ValueError, match=r"control latents \[B=2, Fc<=2, H=4, W=6, C=12\]"):
        model(case.latents, case.timestep, case.context, extensions=_control(case.control[..., :8]))


def _control(control: np.ndarray, scale: np.ndarray | None = None) -> dict[str, dict[str, np.ndarray]]:
    """The VACE extension's inputs of the model's call."""
    return {"vace": {"control": control} if scale is None else {"control": control, "scale": scale}}
