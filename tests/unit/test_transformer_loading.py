"""The transformer loader against a straightforward reference conversion, and its errors.

Reference: every tensor read with safetensors (torch) -> numpy -> `astype` to the dtype
the parameter is stored in (fp32 for what diffusers keeps in fp32). The loaded model,
exported back to diffusers names and layouts (a pure permutation), must equal it bit
for bit, for fp32, bf16 and fp16 files, single-file and sharded, and in both layouts.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
import torch
from diffusers import WanTransformer3DModel
from safetensors.torch import load_file, save_file
from tiny_wan import TINY_TRANSFORMER

from wanjax.adapters.checkpoints.weights import ComponentWeights
from wanjax.adapters.jax.transformer.runtime import TransformerRuntime
from wanjax.adapters.jax.transformer.weights import export_transformer_weights, load_transformer
from wanjax.domain.errors import CheckpointError
from wanjax.domain.specs import TransformerSpec

KEEP_FP32 = ("time_embedder", "scale_shift_table", "norm1", "norm2", "norm3")  # diffusers' _keep_in_fp32_modules
DISK_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
TARGETS = {"float32": np.dtype(np.float32), "bfloat16": np.dtype(ml_dtypes.bfloat16)}


def _numpy(tensor: torch.Tensor) -> np.ndarray:
    if tensor.dtype == torch.bfloat16:
        return tensor.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return tensor.numpy()


def _reference(folder: Path, target: np.dtype) -> dict[str, np.ndarray]:
    tensors = {}
    for file in sorted(folder.glob("*.safetensors")):
        for name, tensor in load_file(file).items():
            keep = any(part in KEEP_FP32 for part in name.split("."))
            tensors[name] = _numpy(tensor).astype(np.float32 if keep else target)
    return tensors


def _tensor(folder: Path, name: str) -> torch.Tensor:
    for file in folder.glob("*.safetensors"):
        tensors = load_file(file)
        if name in tensors:
            return tensors[name]
    raise KeyError(name)


def _offsets(path: Path) -> dict[str, int]:
    """Tensor name -> data offset, from a safetensors header."""
    data = path.read_bytes()
    header = json.loads(data[8 : 8 + int.from_bytes(data[:8], "little")])
    return {n: e["data_offsets"][0] for n, e in header.items() if n != "__metadata__"}


@pytest.fixture(scope="module")
def model() -> WanTransformer3DModel:
    torch.manual_seed(0)
    model = WanTransformer3DModel(**TINY_TRANSFORMER)
    with torch.no_grad():  # norms start at exactly 1 / 0: perturb so every tensor is distinct
        for param in model.parameters():
            param.add_(0.1 * torch.randn_like(param))
    return model


@pytest.fixture(scope="module", params=[(d, s) for d in DISK_DTYPES for s in ("single", "sharded")], ids=str)
def checkpoint(request, model, tmp_path_factory) -> Path:
    disk, layout = request.param
    folder = tmp_path_factory.mktemp(f"{disk}-{layout}")
    copy.deepcopy(model).to(DISK_DTYPES[disk]).save_pretrained(
        folder, max_shard_size="20KB" if layout == "sharded" else "10GB"
    )
    assert len(list(folder.glob("*.safetensors"))) > (2 if layout == "sharded" else 0)
    return folder


def _spec(folder: Path) -> TransformerSpec:
    return TransformerSpec.from_diffusers_config(json.loads((folder / "config.json").read_text()))


def _runtime(target: str, scan_layers: bool = True) -> TransformerRuntime:
    return TransformerRuntime(dtype=jnp.dtype(target), param_dtype=jnp.dtype(target), scan_layers=scan_layers)


@pytest.mark.parametrize("target", TARGETS)
def test_loaded_parameters_equal_the_reference_conversion_bitwise(checkpoint, target):
    loaded = load_transformer(_spec(checkpoint), _runtime(target), ComponentWeights(checkpoint))
    exported, reference = export_transformer_weights(loaded), _reference(checkpoint, TARGETS[target])
    assert exported.keys() == reference.keys()
    for name, want in reference.items():
        assert exported[name].dtype == want.dtype, name
        assert exported[name].tobytes() == want.tobytes(), name


def test_layouts_and_thread_counts_agree(checkpoint):
    spec, weights = _spec(checkpoint), ComponentWeights(checkpoint)
    runs = [
        load_transformer(spec, _runtime("bfloat16", scan), weights, workers=workers)
        for scan, workers in ((True, 1), (True, 3), (False, 2))
    ]
    first, *others = map(export_transformer_weights, runs)
    for other in others:
        for name in first:
            assert first[name].tobytes() == other[name].tobytes(), name


def test_fp8_storage_keeps_norms_embedders_and_biases(checkpoint):
    loaded = load_transformer(
        _spec(checkpoint), _runtime("bfloat16"), ComponentWeights(checkpoint), kernel_dtype=jnp.float8_e4m3fn
    )
    exported = export_transformer_weights(loaded)
    reference = _reference(checkpoint, TARGETS["bfloat16"])
    fp8 = np.dtype(ml_dtypes.float8_e4m3fn)
    for name, want in reference.items():
        block_kernel = name.startswith("blocks.") and name.endswith(".weight") and want.ndim == 2
        if block_kernel:
            assert exported[name].dtype == fp8, name
            expected = _numpy(_tensor(checkpoint, name)).astype(fp8)
            assert exported[name].tobytes() == expected.tobytes(), name
        else:
            assert exported[name].dtype == want.dtype and exported[name].tobytes() == want.tobytes(), name


# ---- damaged checkpoints: every error names the file and the tensor ----


def _write_two_shards(folder: Path, tensors: dict[str, torch.Tensor]) -> dict[str, str]:
    names = sorted(tensors)
    shards = {
        "diffusion_pytorch_model-00001-of-00002.safetensors": names[: len(names) // 2],
        "diffusion_pytorch_model-00002-of-00002.safetensors": names[len(names) // 2 :],
    }
    for shard, members in shards.items():
        save_file({n: tensors[n].contiguous() for n in members}, folder / shard)
    weight_map = {n: shard for shard, members in shards.items() for n in members}
    (folder / "diffusion_pytorch_model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    return weight_map


@pytest.fixture
def damaged(model, tmp_path):
    """(spec, tensors, folder): the tiny model's tensors, to damage and write as two shards."""
    tensors = {name: t.detach().clone() for name, t in model.state_dict().items()}
    spec = TransformerSpec.from_diffusers_config(dict(model.config))
    return spec, tensors, tmp_path


def _error(spec, folder) -> str:
    with pytest.raises(CheckpointError) as raised:
        load_transformer(spec, _runtime("float32"), ComponentWeights(folder))
    return str(raised.value)


def test_truncated_shard_names_file_and_tensor(damaged):
    spec, tensors, folder = damaged
    weight_map = _write_two_shards(folder, tensors)
    shard = folder / "diffusion_pytorch_model-00002-of-00002.safetensors"
    shard.write_bytes(shard.read_bytes()[:-100])
    last = max((n for n, s in weight_map.items() if s == shard.name), key=lambda n: _offsets(shard)[n])
    message = _error(spec, folder)
    assert str(shard) in message and "truncated" in message and repr(last) in message


def test_corrupt_entry_names_file_and_tensor(damaged):
    spec, tensors, folder = damaged
    _write_two_shards(folder, tensors)
    shard = folder / "diffusion_pytorch_model-00001-of-00002.safetensors"
    data = bytearray(shard.read_bytes())
    name = sorted(_offsets(shard))[0]
    position = data.index(b'"shape":[', data.index(f'"{name}"'.encode())) + len(b'"shape":[')
    data[position] = ord("9") if data[position] != ord("9") else ord("8")  # first dim no longer fits the bytes
    shard.write_bytes(bytes(data))
    message = _error(spec, folder)
    assert str(shard) in message and repr(name) in message


def test_missing_tensor_names_folder_and_tensor(damaged):
    spec, tensors, folder = damaged
    del tensors["blocks.1.ffn.net.2.weight"]
    _write_two_shards(folder, tensors)
    message = _error(spec, folder)
    assert "missing 1 tensor" in message and f"{folder}: 'blocks.1.ffn.net.2.weight'" in message


def test_unexpected_tensor_names_file_and_tensor(damaged):
    spec, tensors, folder = damaged
    tensors["blocks.0.attn1.to_qkv.weight"] = torch.zeros(3, 3)
    weight_map = _write_two_shards(folder, tensors)
    shard = folder / weight_map["blocks.0.attn1.to_qkv.weight"]
    assert f"{shard}: 'blocks.0.attn1.to_qkv.weight'" in _error(spec, folder)


def test_shape_mismatch_names_file_tensor_and_shapes(damaged):
    spec, tensors, folder = damaged
    tensors["blocks.1.attn2.to_v.weight"] = torch.zeros(24, 23)
    weight_map = _write_two_shards(folder, tensors)
    message = _error(spec, folder)
    shard = folder / weight_map["blocks.1.attn2.to_v.weight"]
    assert f"{shard}: 'blocks.1.attn2.to_v.weight'" in message and "(24, 23)" in message and "(24, 24)" in message
