"""Safetensors files and sharded components: exact tensors, and named errors for every kind of damage."""

import json

import ml_dtypes
import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from wanjax.adapters.checkpoints.safetensors_file import SafetensorsFile
from wanjax.adapters.checkpoints.weights import ComponentWeights
from wanjax.domain.errors import CheckpointError


def _tensors():
    g = torch.Generator().manual_seed(0)
    return {
        "a.weight": torch.randn(3, 5, generator=g),
        "b.bias": torch.randn(7, generator=g).to(torch.bfloat16),
        "c": torch.randn(2, 2, 2, generator=g).to(torch.float16),
        "empty": torch.zeros(0, 4),
    }


def _as_numpy(t: torch.Tensor) -> np.ndarray:
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.numpy()


def test_tensors_are_bitwise_views_of_the_file(tmp_path):
    tensors = _tensors()
    save_file(tensors, tmp_path / "m.safetensors")
    file = SafetensorsFile(tmp_path / "m.safetensors")
    assert sorted(file.names) == sorted(tensors)
    for name, expected in tensors.items():
        got = file.tensor(name)
        want = _as_numpy(expected)
        assert got.dtype == want.dtype and got.shape == want.shape
        assert got.tobytes() == want.tobytes()
        assert not got.flags.writeable


def test_truncated_file_names_the_file_and_sizes(tmp_path):
    path = tmp_path / "m.safetensors"
    save_file(_tensors(), path)
    path.write_bytes(path.read_bytes()[:-10])
    with pytest.raises(CheckpointError, match=r"m\.safetensors: truncated safetensors file"):
        SafetensorsFile(path)


@pytest.mark.parametrize(
    "content, message",
    [
        (b"", "no header"),
        (b"\xff" * 64, "header"),
        ((20).to_bytes(8, "little") + b"{not json at all....", "corrupt safetensors header"),
        ((2).to_bytes(8, "little") + b"[]", "not a JSON object"),
    ],
)
def test_corrupt_header_is_reported(tmp_path, content, message):
    path = tmp_path / "bad.safetensors"
    path.write_bytes(content)
    with pytest.raises(CheckpointError, match=message):
        SafetensorsFile(path)


def test_entry_with_inconsistent_sizes_names_the_tensor(tmp_path):
    header = json.dumps({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 12]}}).encode()
    path = tmp_path / "bad.safetensors"
    path.write_bytes(len(header).to_bytes(8, "little") + header + b"\0" * 16)
    with pytest.raises(CheckpointError, match="tensor 'w'"):
        SafetensorsFile(path)


def _write_sharded(folder, tensors):
    names = sorted(tensors)
    shards = {"model-00001-of-00002.safetensors": names[:2], "model-00002-of-00002.safetensors": names[2:]}
    for shard, members in shards.items():
        save_file({n: tensors[n] for n in members}, folder / shard)
    weight_map = {n: shard for shard, members in shards.items() for n in members}
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return shards


def test_sharded_component_reads_every_tensor(tmp_path):
    tensors = _tensors()
    _write_sharded(tmp_path, tensors)
    weights = ComponentWeights(tmp_path)
    assert sorted(weights) == sorted(tensors)
    for name, expected in tensors.items():
        assert weights[name].tobytes() == _as_numpy(expected).tobytes()


def test_missing_shard_names_the_shard(tmp_path):
    shards = _write_sharded(tmp_path, _tensors())
    missing = sorted(shards)[1]
    (tmp_path / missing).unlink()
    with pytest.raises(CheckpointError, match=f"shard '{missing}'.*is missing"):
        ComponentWeights(tmp_path)


def test_index_naming_a_tensor_absent_from_its_shard(tmp_path):
    _write_sharded(tmp_path, _tensors())
    index = json.loads((tmp_path / "model.safetensors.index.json").read_text())
    index["weight_map"]["ghost.weight"] = "model-00001-of-00002.safetensors"
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(CheckpointError, match="'ghost.weight'"):
        ComponentWeights(tmp_path)


def test_folder_without_weights(tmp_path):
    with pytest.raises(CheckpointError, match="no safetensors weights found"):
        ComponentWeights(tmp_path)
