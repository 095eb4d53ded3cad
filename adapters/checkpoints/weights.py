"""The weights of one component: a single safetensors file or shards listed by an index."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path

import numpy as np

from wanjax.adapters.checkpoints.safetensors_file import SafetensorsFile
from wanjax.domain.errors import CheckpointError

# (single file, index) names used by diffusers models and by transformers models
WEIGHT_FILE_NAMES = (
    ("diffusion_pytorch_model.safetensors", "diffusion_pytorch_model.safetensors.index.json"),
    ("model.safetensors", "model.safetensors.index.json"),
)


class ComponentWeights(Mapping[str, np.ndarray]):
    """Tensor name -> zero-copy view, over every file of a component.

    Opening validates every file's header and, for sharded weights, that each shard
    the index names exists and holds the tensors the index assigns to it.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self._files: dict[str, SafetensorsFile] = {}
        self._owner: dict[str, str] = {}
        single, index = _find_weight_files(self.folder)
        if index is not None:
            self._open_sharded(index)
        else:
            assert single is not None
            self._add_file(single)

    def _open_sharded(self, index: Path) -> None:
        try:
            weight_map = json.loads(index.read_text())["weight_map"]
        except (json.JSONDecodeError, KeyError, TypeError) as err:
            raise CheckpointError(f"{index}: corrupt index file ({err!r}); re-download the checkpoint") from None
        for shard in sorted(set(weight_map.values())):
            if not (self.folder / shard).is_file():
                raise CheckpointError(
                    f"{self.folder}: shard {shard!r} listed in {index.name} is missing; "
                    "re-download the checkpoint (all shards are needed)"
                )
            self._add_file(self.folder / shard)
        for name, shard in weight_map.items():
            if self._owner.get(name) != shard:
                raise CheckpointError(
                    f"{self.folder / shard}: tensor {name!r} listed in {index.name} is not in the shard; "
                    "re-download the checkpoint"
                )

    def _add_file(self, path: Path) -> None:
        file = SafetensorsFile(path)
        self._files[path.name] = file
        for name in file.names:
            self._owner[name] = path.name

    def file_of(self, name: str) -> Path:
        return self._files[self._owner[name]].path

    def __getitem__(self, name: str) -> np.ndarray:
        if name not in self._owner:
            raise KeyError(name)
        return self._files[self._owner[name]].tensor(name)

    def __iter__(self) -> Iterator[str]:
        return iter(self._owner)

    def __len__(self) -> int:
        return len(self._owner)


def _find_weight_files(folder: Path) -> tuple[Path | None, Path | None]:
    for single, index in WEIGHT_FILE_NAMES:
        if (folder / index).is_file():
            return None, folder / index
        if (folder / single).is_file():
            return folder / single, None
    expected = " or ".join(f"{s} / {i}" for s, i in WEIGHT_FILE_NAMES)
    raise CheckpointError(f"{folder}: no safetensors weights found (expected {expected}); re-download the checkpoint")
