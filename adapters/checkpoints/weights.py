"""The weights of one component: a single safetensors file or shards listed by an index."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from wanjax.adapters.checkpoints.gguf_file import GgufWeights, PackedTensors
from wanjax.adapters.checkpoints.pth_file import SUFFIXES as PTH_SUFFIXES
from wanjax.adapters.checkpoints.pth_file import PthWeights
from wanjax.adapters.checkpoints.safetensors_file import FileIdentity, SafetensorsFile
from wanjax.domain.errors import CheckpointError

# (single file, index) names used by diffusers models and by transformers models
WEIGHT_FILE_NAMES = (
    ("diffusion_pytorch_model.safetensors", "diffusion_pytorch_model.safetensors.index.json"),
    ("model.safetensors", "model.safetensors.index.json"),
)


@runtime_checkable
class TensorFiles(Protocol):
    """Tensors backed by files: what a loader needs beyond the Mapping to read lean and
    report well. Plain dicts of arrays (tests) are loaded too, without these."""

    def locate(self, name: str) -> str:
        """Where tensor `name` lives, for error messages (its file, its name there)."""
        ...

    def release(self, name: str) -> None:
        """Tensor `name` has been read for good: its file pages may leave the process."""
        ...

    def identity(self) -> tuple[FileIdentity, ...]:
        """Every file read, identified by path, size and mtime."""
        ...

    def byte_offset(self, name: str) -> tuple[str, int]:
        """(file, offset): reading tensors in this order reads each file front to back."""
        ...


class ComponentWeights(Mapping[str, np.ndarray]):
    """Tensor name -> zero-copy view, over every file of a component.

    `location` is a component folder, a single `.safetensors` file, or the
    `.safetensors.index.json` of shards. Opening validates every file's header and, for
    sharded weights, that each shard the index names exists and holds the tensors the
    index assigns to it.
    """

    def __init__(self, location: Path) -> None:
        location = Path(location)
        self.folder = location if location.is_dir() else location.parent
        self._files: dict[str, SafetensorsFile] = {}
        self._owner: dict[str, str] = {}
        single, index = _find_weight_files(location)
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

    def locate(self, name: str) -> str:
        return f"{self.file_of(name)}: {name!r}" if name in self._owner else f"{self.folder}: {name!r}"

    def release(self, name: str) -> None:
        self._files[self._owner[name]].release(name)

    def identity(self) -> tuple[FileIdentity, ...]:
        return tuple(file.identity() for _, file in sorted(self._files.items()))

    def byte_offset(self, name: str) -> tuple[str, int]:
        """(file, offset): reading tensors in this order reads each file front to back."""
        file = self._files[self._owner[name]]
        return file.path.name, file.entries[name].begin

    def parameter_count(self) -> int:
        """Elements over every tensor, from the headers alone (nothing is read)."""
        return sum(math.prod(entry.shape) for file in self._files.values() for entry in file.entries.values())

    def __getitem__(self, name: str) -> np.ndarray:
        if name not in self._owner:
            raise KeyError(name)
        return self._files[self._owner[name]].tensor(name)

    def __iter__(self) -> Iterator[str]:
        return iter(self._owner)

    def __len__(self) -> int:
        return len(self._owner)


def _find_weight_files(location: Path) -> tuple[Path | None, Path | None]:
    if location.is_file():
        if location.name.endswith(".index.json"):
            return None, location
        if location.suffix == ".safetensors":
            return location, None
        raise CheckpointError(f"{location}: not a .safetensors file or a .safetensors.index.json")
    for single, index in WEIGHT_FILE_NAMES:
        if (location / index).is_file():
            return None, location / index
        if (location / single).is_file():
            return location / single, None
    if not location.exists():
        raise CheckpointError(f"weights not found: {location} does not exist")
    expected = " or ".join(f"{s} / {i}" for s, i in WEIGHT_FILE_NAMES)
    raise CheckpointError(f"{location}: no safetensors weights found (expected {expected}); re-download the checkpoint")


def open_weights(location: Path) -> ComponentWeights | PthWeights:
    """A component's tensors from a folder, a `.safetensors` file, a shard index or a `.pth`
    state dict (read with `weights_only`, see `pth_file.py`)."""
    location = Path(location)
    if location.suffix in PTH_SUFFIXES:
        return PthWeights(location)
    return ComponentWeights(location)


View = Callable[[np.ndarray], np.ndarray]
"""A tensor read as another: a reshape, or one part of a fused tensor (a view, never a copy)."""


class RenamedWeights(Mapping[str, np.ndarray]):
    """`source` seen under other names (`rename(source name) -> name`), e.g. the original
    Wan checkpoints' names seen as diffusers names, plus tensors `views` derives from source
    tensors (name -> (source name, view): a bias stored [1, C, 1, 1] read as [C], a fused K/V
    projection read as its K and V halves). A source tensor neither renames nor views is left
    out. Keeps `TensorFiles` working, and error messages show both names."""

    def __init__(
        self,
        source: Mapping[str, np.ndarray],
        rename: dict[str, str],
        views: Mapping[str, tuple[str, View]] | None = None,
    ) -> None:
        self._source = source
        self._original: dict[str, str] = {}
        self._views = dict(views or {})
        named = [*rename.items(), *((old, new) for new, (old, _) in self._views.items())]
        for old, new in named:
            if new in self._original:
                raise CheckpointError(
                    f"{_locate(source, old)} and {self._original[new]!r} both map to {new!r}; "
                    "is this a Wan checkpoint?"
                )
            self._original[new] = old

    def locate(self, name: str) -> str:
        original = self._original.get(name, name)
        where = _locate(self._source, original)
        return where if original == name else f"{where} (read as {name!r})"

    def release(self, name: str) -> None:
        if isinstance(self._source, TensorFiles):
            self._source.release(self._original[name])

    def identity(self) -> tuple[FileIdentity, ...]:
        return self._source.identity() if isinstance(self._source, TensorFiles) else ()

    def byte_offset(self, name: str) -> tuple[str, int]:
        if isinstance(self._source, TensorFiles):
            return self._source.byte_offset(self._original[name])
        return "", 0

    def shape(self, name: str) -> tuple[int, ...]:
        """Tensor `name`'s shape; from the source's headers where it has them (a quantized tensor is
        then not dequantized to be measured)."""
        if name in self._views or not hasattr(self._source, "shape"):
            return tuple(self[name].shape)
        return tuple(self._source.shape(self._original[name]))

    def block_type(self, name: str) -> str | None:
        """The source's packed GGUF block type of `name` (`PackedTensors`); None when a view reads it."""
        if name in self._views or not isinstance(self._source, PackedTensors):
            return None
        return self._source.block_type(self._original[name])

    def packed(self, name: str) -> np.ndarray:
        return self._source.packed(self._original[name])

    def block_kernel_bytes(self) -> float | None:
        return self._source.block_kernel_bytes() if isinstance(self._source, PackedTensors) else None

    def scale(self, name: str) -> np.float32:
        """A scaled fp8 source's scale of `name` (`scaled_fp8.ScaledFp8Weights`)."""
        return self._source.scale(self._original[name])

    def parameter_count(self) -> int:
        """From the source's headers where it has them (nothing is read), else from the shapes."""
        if isinstance(self._source, (ComponentWeights, PthWeights, GgufWeights)):
            return self._source.parameter_count()
        return sum(math.prod(self[name].shape) for name in self)

    def __getitem__(self, name: str) -> np.ndarray:
        tensor = self._source[self._original[name]]
        view = self._views.get(name)
        return tensor if view is None else view[1](tensor)

    def __contains__(self, name: object) -> bool:  # without reading the tensor
        return name in self._original

    def __iter__(self) -> Iterator[str]:
        return iter(self._original)

    def __len__(self) -> int:
        return len(self._original)


def _locate(tensors: Mapping[str, np.ndarray], name: str) -> str:
    return tensors.locate(name) if isinstance(tensors, TensorFiles) else repr(name)


Weights = ComponentWeights | PthWeights | GgufWeights | RenamedWeights
"""A component's tensors as the loaders read them: `TensorFiles`, and a `parameter_count()`."""
