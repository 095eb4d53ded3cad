"""Original-format Wan checkpoints (Wan repos / ComfyUI names) load equal to diffusers ones.

A tiny diffusers checkpoint is rewritten under the original names (the inverse of the
renaming, checked against diffusers' own converter), as one prefixed file (ComfyUI) and
as shards with an index (the Wan repos), and must load to the same parameters.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from diffusers.loaders.single_file_utils import convert_wan_transformer_to_diffusers
from safetensors.numpy import load_file, save_file

from official_folders import original_name

from wanjax.adapters.checkpoints.diffusers_folder import DiffusersCheckpoint
from wanjax.adapters.checkpoints.original_names import transformer_weights
from wanjax.adapters.jax.transformer.runtime import TransformerRuntime
from wanjax.adapters.jax.transformer.weights import export_transformer_weights, load_transformer
from wanjax.application.container import build_container
from wanjax.application.presets import resolve_config


def _diffusers_tensors(folder: Path) -> dict[str, np.ndarray]:
    return load_file(folder / "transformer" / "diffusion_pytorch_model.safetensors")


@pytest.mark.parametrize("checkpoint", ["tiny_checkpoint", "tiny_i2v_checkpoint"])
def test_inverse_names_are_what_diffusers_converts_back(checkpoint, request):
    names = list(_diffusers_tensors(request.getfixturevalue(checkpoint)))
    original = {f"model.diffusion_model.{original_name(n)}": n for n in names}
    assert len(set(original)) == len(names)
    converted = convert_wan_transformer_to_diffusers(dict.fromkeys(original, None))
    assert sorted(converted) == sorted(names)


def write_original(tensors: dict[str, np.ndarray], folder: Path, *, sharded: bool) -> Path:
    folder.mkdir()
    renamed = {original_name(n): t for n, t in tensors.items()}
    if not sharded:
        save_file({f"model.diffusion_model.{n}": t for n, t in renamed.items()}, folder / "wan.safetensors")
        return folder / "wan.safetensors"
    names = sorted(renamed)
    shards = {"diffusion_pytorch_model-00001-of-00002.safetensors": names[::2],
              "diffusion_pytorch_model-00002-of-00002.safetensors": names[1::2]}  # fmt: skip
    for shard, members in shards.items():
        save_file({n: renamed[n] for n in members}, folder / shard)
    weight_map = {n: shard for shard, members in shards.items() for n in members}
    index = folder / "diffusion_pytorch_model.safetensors.index.json"
    index.write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return folder


@pytest.mark.parametrize("sharded", [False, True], ids=["comfyui-file", "wan-shards"])
def test_original_format_loads_equal_to_diffusers(tiny_checkpoint, tmp_path, sharded):
    checkpoint = DiffusersCheckpoint(tiny_checkpoint)
    location = write_original(_diffusers_tensors(tiny_checkpoint), tmp_path / "original", sharded=sharded)
    runtime = TransformerRuntime(dtype=np.float32, param_dtype=np.float32)
    spec = checkpoint.transformer_spec
    ours = export_transformer_weights(load_transformer(spec, runtime, transformer_weights(location)))
    reference = export_transformer_weights(load_transformer(spec, runtime, checkpoint.weights("transformer")))
    assert ours.keys() == reference.keys()
    for name in reference:
        assert ours[name].tobytes() == reference[name].tobytes(), name


def test_transformer_file_key_replaces_the_folder_weights(tiny_checkpoint, tmp_path):
    location = write_original(_diffusers_tensors(tiny_checkpoint), tmp_path / "original", sharded=False)
    runs = []
    for overrides in ({}, {"transformer_file": str(location)}):
        config = resolve_config(str(tiny_checkpoint), {"max_sequence_length": "8", **overrides})
        request = config.request("a fox", height=32, width=48, num_frames=5, num_inference_steps=2)
        runs.append(build_container(config).service().generate(request, output_type="latent").array)
    np.testing.assert_array_equal(*runs)
