"""`.pth` state dicts (the official Wan VAE, T5 and CLIP files) are read as tensors only."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from wanjax.adapters.checkpoints.pth_file import PthWeights
from wanjax.adapters.checkpoints.weights import open_weights
from wanjax.domain.errors import CheckpointError


class NotATensor:
    pass


@pytest.mark.parametrize(
    "content, message",
    [
        (NotATensor(), "refused, it holds a .*NotATensor object.*weights_only"),
        ({"weight": torch.zeros(2), "epoch": 3}, r"entries \['epoch'\] are not tensors"),
        ([torch.zeros(2)], "holds a list, not a state dict"),
    ],
    ids=["object", "training-checkpoint", "list"],
)
def test_pth_files_are_read_as_tensors_only(tmp_path, content, message) -> None:
    torch.save(content, tmp_path / "model.pth")
    with pytest.raises(CheckpointError, match=message):
        PthWeights(tmp_path / "model.pth")


def test_pth_tensors_are_zero_copy_views_including_bfloat16(tmp_path) -> None:
    state = {"a": torch.arange(6.0).reshape(2, 3), "b": torch.tensor([1.5, -2.0], dtype=torch.bfloat16)}
    torch.save(state, tmp_path / "model.pth")
    weights = PthWeights(tmp_path / "model.pth")
    assert weights.parameter_count() == 8 and list(weights) == ["a", "b"]
    np.testing.assert_array_equal(weights["a"], state["a"].numpy())
    assert str(weights["b"].dtype) == "bfloat16" and weights["b"].astype(np.float32).tolist() == [1.5, -2.0]


def test_a_corrupt_pth_is_named(tmp_path) -> None:
    (tmp_path / "model.pth").write_bytes(b"not a torch file")
    with pytest.raises(CheckpointError, match="model.pth: not a readable .pth file"):
        open_weights(tmp_path / "model.pth")
