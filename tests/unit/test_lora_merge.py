"""LoRA files in each key style: the merged tensors are W + scale * (alpha / rank) * up @ down
(or W + scale * diff), every other tensor passes through untouched, and every key that
cannot be placed is named in a CheckpointError."""

from __future__ import annotations

import json

import ml_dtypes
import numpy as np
import pytest
from safetensors.numpy import save_file

from wanjax.adapters.lora import read_lora, with_loras
from wanjax.domain.errors import CheckpointError
from wanjax.domain.lora import LoraSpec

RANK = 3
# diffusers names and torch shapes of the tensors the LoRAs below touch (a 2-block model, dim 6)
SHAPES = {
    "blocks.0.attn1.to_q.weight": (8, 6), "blocks.0.attn1.to_q.bias": (8,),
    "blocks.0.attn1.norm_q.weight": (8,), "blocks.0.attn2.to_out.0.weight": (6, 8),
    "blocks.0.norm2.weight": (6,), "blocks.0.norm2.bias": (6,), "blocks.0.scale_shift_table": (1, 6, 6),
    "blocks.1.ffn.net.0.proj.weight": (10, 6), "blocks.1.ffn.net.2.weight": (6, 10),
    "condition_embedder.time_proj.weight": (36, 6), "proj_out.weight": (4, 6), "scale_shift_table": (1, 2, 6),
    "patch_embedding.weight": (6, 4, 1, 2, 2), "untouched.weight": (5, 5),
}  # fmt: skip


@pytest.fixture
def base(rng):
    return {name: rng.standard_normal(shape).astype(np.float32) for name, shape in SHAPES.items()}


def _pair(rng, target, rank=RANK):
    """Random (down [r, in], up [out, r]) for the diffusers tensor `target`."""
    out, inp = SHAPES[target]
    return rng.standard_normal((rank, inp)).astype(np.float32), rng.standard_normal((out, rank)).astype(np.float32)


def _write(tmp_path, tensors, name="lora.safetensors", metadata=None):
    save_file(tensors, tmp_path / name, metadata=metadata)
    return tmp_path / name


def _check(merged, base, target, delta):
    """merged[target] == base[target] + delta (fp32 rounding apart)."""
    np.testing.assert_allclose(merged[target], base[target] + delta, rtol=1e-5, atol=1e-6, err_msg=target)


@pytest.mark.parametrize("prefix", ["transformer.", "", "base_model.model."])
def test_diffusers_peft_names(tmp_path, base, rng, prefix):
    down, up = _pair(rng, "blocks.0.attn1.to_q.weight")
    bias = rng.standard_normal(8).astype(np.float32)
    path = _write(tmp_path, {
        f"{prefix}blocks.0.attn1.to_q.lora_A.weight": down, f"{prefix}blocks.0.attn1.to_q.lora_B.weight": up,
        f"{prefix}blocks.0.attn1.to_q.lora_B.bias": bias,
    })  # fmt: skip
    merged = with_loras(base, [LoraSpec(str(path), 0.7)])
    _check(merged, base, "blocks.0.attn1.to_q.weight", 0.7 * up @ down)
    _check(merged, base, "blocks.0.attn1.to_q.bias", 0.7 * bias)


@pytest.mark.parametrize("rslora, factor", [(False, 8 / RANK), (True, 8 / np.sqrt(RANK))])
def test_diffusers_metadata_alpha_is_peft_scaling(tmp_path, base, rng, rslora, factor):
    down, up = _pair(rng, "blocks.1.ffn.net.2.weight")
    config = {"transformer.r": RANK, "transformer.lora_alpha": 8, "transformer.use_rslora": rslora}
    path = _write(tmp_path, {"transformer.blocks.1.ffn.net.2.lora_A.weight": down,
                             "transformer.blocks.1.ffn.net.2.lora_B.weight": up},
                  metadata={"format": "pt", "lora_adapter_metadata": json.dumps(config)})  # fmt: skip
    merged = with_loras(base, [LoraSpec(str(path))])
    _check(merged, base, "blocks.1.ffn.net.2.weight", factor * up @ down)


@pytest.mark.parametrize("down_key, up_key", [("lora_down", "lora_up"), ("lora_A", "lora_B")])
@pytest.mark.parametrize("prefix", ["diffusion_model.", ""])
def test_original_wan_names_with_alpha(tmp_path, base, rng, down_key, up_key, prefix):
    """ComfyUI / original Wan names; Wan2.2-Lightning uses them with .alpha (lora_down/up or lora_A/B)."""
    modules = {
        "blocks.0.cross_attn.o": "blocks.0.attn2.to_out.0.weight", "blocks.1.ffn.0": "blocks.1.ffn.net.0.proj.weight",
        "time_projection.1": "condition_embedder.time_proj.weight", "head.head": "proj_out.weight",
    }  # fmt: skip
    tensors, expected = {}, {}
    for i, (module, target) in enumerate(modules.items()):
        down, up = _pair(rng, target)
        alpha = float(2 + i)
        tensors |= {f"{prefix}{module}.{down_key}.weight": down, f"{prefix}{module}.{up_key}.weight": up,
                    f"{prefix}{module}.alpha": np.array(alpha, np.float32)}  # fmt: skip
        expected[target] = 1.5 * alpha / RANK * up @ down
    merged = with_loras(base, [LoraSpec(str(_write(tmp_path, tensors)), 1.5)])
    for target, delta in expected.items():
        _check(merged, base, target, delta)


def test_lightx2v_full_deltas(tmp_path, base, rng):
    """LightX2V's extractor: `.diff` (weights, norms), `.diff_b` (biases), `.diff_m` (modulation)."""
    deltas = {  # file key -> diffusers target
        "blocks.0.self_attn.q.diff_b": "blocks.0.attn1.to_q.bias",
        "blocks.0.self_attn.norm_q.diff": "blocks.0.attn1.norm_q.weight",
        "blocks.0.norm3.diff": "blocks.0.norm2.weight",
        "blocks.0.norm3.diff_b": "blocks.0.norm2.bias",
        "blocks.0.diff_m": "blocks.0.scale_shift_table",
        "head.diff_m": "scale_shift_table",
        "head.head.diff": "proj_out.weight",
        "patch_embedding.diff": "patch_embedding.weight",
    }
    tensors = {f"diffusion_model.{k}": rng.standard_normal(SHAPES[t]).astype(np.float32) for k, t in deltas.items()}
    down, up = _pair(rng, "blocks.0.attn1.to_q.weight")  # alpha-less pair: factor 1
    tensors |= {"diffusion_model.blocks.0.self_attn.q.lora_down.weight": down,
                "diffusion_model.blocks.0.self_attn.q.lora_up.weight": up}  # fmt: skip
    merged = with_loras(base, [LoraSpec(str(_write(tmp_path, tensors)), 0.5)])
    for key, target in deltas.items():
        _check(merged, base, target, 0.5 * tensors[f"diffusion_model.{key}"])
    _check(merged, base, "blocks.0.attn1.to_q.weight", 0.5 * up @ down)


def test_kohya_names(tmp_path, base, rng):
    down, up = _pair(rng, "blocks.1.ffn.net.0.proj.weight")
    key = "lora_unet_blocks_1_ffn_0"
    path = _write(tmp_path, {f"{key}.lora_down.weight": down, f"{key}.lora_up.weight": up,
                             f"{key}.alpha": np.array(6.0, np.float32)})  # fmt: skip
    merged = with_loras(base, [LoraSpec(str(path))])
    _check(merged, base, "blocks.1.ffn.net.0.proj.weight", 6 / RANK * up @ down)


def test_convolution_low_rank(tmp_path, base, rng):
    down = rng.standard_normal((RANK, 4, 1, 2, 2)).astype(np.float32)
    up = rng.standard_normal((6, RANK, 1, 1, 1)).astype(np.float32)
    path = _write(tmp_path, {"diffusion_model.patch_embedding.lora_down.weight": down,
                             "diffusion_model.patch_embedding.lora_up.weight": up})  # fmt: skip
    merged = with_loras(base, [LoraSpec(str(path))])
    delta = (up.reshape(6, RANK) @ down.reshape(RANK, -1)).reshape(6, 4, 1, 2, 2)
    _check(merged, base, "patch_embedding.weight", delta)


def test_several_loras_add_up_and_the_rest_passes_through(tmp_path, base, rng):
    target = "blocks.0.attn1.to_q.weight"
    (d1, u1), (d2, u2) = _pair(rng, target), _pair(rng, target, rank=2)
    a = _write(tmp_path, {"diffusion_model.blocks.0.self_attn.q.lora_down.weight": d1,
                          "diffusion_model.blocks.0.self_attn.q.lora_up.weight": u1}, "a.safetensors")  # fmt: skip
    b = _write(tmp_path, {"transformer.blocks.0.attn1.to_q.lora_A.weight": d2,
                          "transformer.blocks.0.attn1.to_q.lora_B.weight": u2}, "b.safetensors")  # fmt: skip
    merged = with_loras(base, [LoraSpec(str(a), 0.8), LoraSpec(str(b), -0.3)])
    _check(merged, base, target, 0.8 * u1 @ d1 - 0.3 * u2 @ d2)
    assert merged["untouched.weight"] is base["untouched.weight"]
    assert set(merged) == set(base) and len(merged) == len(base) and "untouched.weight" in merged


def test_math_is_fp32_and_the_stored_dtype_is_kept(tmp_path, base, rng):
    target = "blocks.1.ffn.net.2.weight"
    stored = {**base, target: base[target].astype(ml_dtypes.bfloat16)}
    down, up = _pair(rng, target)
    path = _write(tmp_path, {"transformer.blocks.1.ffn.net.2.lora_A.weight": down.astype(np.float16),
                             "transformer.blocks.1.ffn.net.2.lora_B.weight": up.astype(np.float16)})  # fmt: skip
    merged = with_loras(stored, [LoraSpec(str(path))])[target]
    up, down = (t.astype(np.float16).astype(np.float32) for t in (up, down))  # what the file holds
    want = stored[target].astype(np.float32) + up @ down
    assert merged.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(merged, want.astype(ml_dtypes.bfloat16))


def test_no_loras_is_the_base_itself(base):
    assert with_loras(base, []) is base


# --- every key that cannot be placed is named ---


def test_unknown_module_names_are_listed(tmp_path, base, rng):
    down, up = _pair(rng, "blocks.0.attn1.to_q.weight")
    path = _write(tmp_path, {
        "diffusion_model.blocks.0.self_attn.zz.lora_down.weight": down,
        "diffusion_model.blocks.0.self_attn.zz.lora_up.weight": up,
        "diffusion_model.blocks.0.self_attn.q.dora_scale": up[:, :1], "something_else": up,
    })  # fmt: skip
    with pytest.raises(CheckpointError, match="4 key.s. match no Wan transformer weight") as err:
        read_lora(path)
    for key in ("self_attn.zz.lora_down.weight", "self_attn.zz.lora_up.weight", "q.dora_scale", "something_else"):
        assert key in str(err.value)


def test_keys_for_missing_tensors_are_listed(tmp_path, base, rng):
    down, up = _pair(rng, "blocks.0.attn1.to_q.weight")
    path = _write(tmp_path, {f"diffusion_model.blocks.{i}.self_attn.q.lora_{r}.weight": t
                             for i in (0, 7, 9) for r, t in (("down", down), ("up", up))})  # fmt: skip
    with pytest.raises(CheckpointError, match="2 key.s. target no tensor") as err:
        with_loras(base, [LoraSpec(str(path))])
    assert "blocks.7.attn1.to_q.weight" in str(err.value) and "blocks.9.attn1.to_q.weight" in str(err.value)


def test_shapes_that_do_not_fit_are_listed(tmp_path, base, rng):
    down, up = _pair(rng, "blocks.1.ffn.net.0.proj.weight")  # [r, 6], [10, r]: not to_q's [8, 6]
    path = _write(tmp_path, {
        "transformer.blocks.0.attn1.to_q.lora_A.weight": down, "transformer.blocks.0.attn1.to_q.lora_B.weight": up,
        "diffusion_model.blocks.0.norm3.diff": np.zeros(7, np.float32),
    })  # fmt: skip
    with pytest.raises(CheckpointError, match="2 key.s. do not fit") as err:
        with_loras(base, [LoraSpec(str(path))])
    assert "(10, 3) @ down (3, 6) vs tensor (8, 6)" in str(err.value) and "delta (7,) vs tensor (6,)" in str(err.value)


def test_incomplete_pairs_are_listed(tmp_path, rng):
    down, _ = _pair(rng, "blocks.0.attn1.to_q.weight")
    path = _write(tmp_path, {"diffusion_model.blocks.0.self_attn.q.lora_down.weight": down,
                             "diffusion_model.blocks.0.self_attn.k.alpha": np.array(4.0, np.float32)})  # fmt: skip
    with pytest.raises(CheckpointError, match="2 key.s. of incomplete low-rank pairs") as err:
        read_lora(path)
    assert "self_attn.q.lora_down.weight" in str(err.value) and "self_attn.k.alpha" in str(err.value)


def test_two_keys_for_one_part_are_listed(tmp_path, rng):
    down, up = _pair(rng, "blocks.0.attn1.to_q.weight")
    path = _write(tmp_path, {
        "diffusion_model.blocks.0.self_attn.q.lora_down.weight": down,
        "diffusion_model.blocks.0.self_attn.q.lora_A.weight": down,
        "diffusion_model.blocks.0.self_attn.q.lora_up.weight": up,
        "diffusion_model.blocks.0.diff_m": np.zeros((1, 6, 6), np.float32),
        "diffusion_model.blocks.0.modulation.diff": np.zeros((1, 6, 6), np.float32),
    })  # fmt: skip
    with pytest.raises(CheckpointError, match="4 key.s. give the same part of one module") as err:
        read_lora(path)
    for key in ("q.lora_down.weight", "q.lora_A.weight", "blocks.0.diff_m", "blocks.0.modulation.diff"):
        assert key in str(err.value)


def test_missing_file_and_unsupported_peft_options(tmp_path, rng):
    with pytest.raises(CheckpointError, match="LoRA file not found"):
        read_lora(tmp_path / "nope.safetensors")
    down, up = _pair(rng, "blocks.0.attn1.to_q.weight")
    pair = {"transformer.blocks.0.attn1.to_q.lora_A.weight": down, "transformer.blocks.0.attn1.to_q.lora_B.weight": up}
    path = _write(tmp_path, pair, metadata={"lora_adapter_metadata": json.dumps({"transformer.use_dora": True})})
    with pytest.raises(CheckpointError, match="use_dora"):
        read_lora(path)

