"""A `.pth` state dict (the official Wan VAE, T5 and CLIP files) as numpy views, read safely.

The file is read with `torch.load(weights_only=True)` only: torch's restricted unpickler,
which builds tensors and plain containers and refuses any other object, so opening a
file never runs code from it. The top level must be a flat dict of tensor names to
tensors. Zip-format files (every `torch.save` since torch 1.6) are memory-mapped, so
opening one reads no tensor data; older files are read whole.
"""

from __future__ import annotations

import math
import pickle
import re
import zipfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np

from wanjax.adapters.checkpoints.safetensors_file import FileIdentity
from wanjax.domain.errors import CheckpointError

SUFFIXES = (".pth", ".pt")
REFUSED = (
    "wanjax reads .pth files with torch.load(weights_only=True), which builds tensors only; "
    "use the checkpoint's official file, or save its state dict of tensors "
    "(torch.save(model.state_dict(), path)) or a .safetensors file"
)


class PthWeights(Mapping[str, np.ndarray]):
    """Tensor name -> numpy view of a `.pth` state dict; bf16 comes back as ml_dtypes' bfloat16."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._tensors = _load_state_dict(self.path)
        self._order = {name: index for index, name in enumerate(self._tensors)}

    def locate(self, name: str) -> str:
        return f"{self.path}: {name!r}"

    def release(self, name: str) -> None:
        """Nothing to do: torch owns the mapping, and the pages are the kernel's page cache."""

    def identity(self) -> tuple[FileIdentity, ...]:
        return (FileIdentity.of(self.path),)

    def byte_offset(self, name: str) -> tuple[str, int]:
        """The file's own order of tensors (a `.pth` states no offsets)."""
        return self.path.name, self._order[name]

    def parameter_count(self) -> int:
        return sum(math.prod(tensor.shape) for tensor in self._tensors.values())

    def __getitem__(self, name: str) -> np.ndarray:
        return _numpy_view(self._tensors[name])

    def __iter__(self) -> Iterator[str]:
        return iter(self._tensors)

    def __len__(self) -> int:
        return len(self._tensors)


def _load_state_dict(path: Path) -> dict[str, Any]:
    import torch

    if not path.is_file():
        raise CheckpointError(f"weights file not found: {path}")
    try:
        loaded = torch.load(path, map_location="cpu", weights_only=True, mmap=zipfile.is_zipfile(path))
    except pickle.UnpicklingError as err:  # torch's restricted unpickler refused the file
        found = re.search(r"Unsupported global: GLOBAL (\S+)", str(err))
        if found:
            raise CheckpointError(f"{path}: refused, it holds a {found[1]} object; {REFUSED}") from None
        detail = re.search(r"WeightsUnpickler error:\s*(.+)", str(err))
        raise CheckpointError(
            f"{path}: not a readable .pth file ({detail[1].strip() if detail else err}): corrupt, or holding more "
            "than tensors; re-download the checkpoint, or re-save it as a state dict of tensors"
        ) from None
    except (RuntimeError, EOFError, OSError, ValueError) as err:
        raise CheckpointError(f"{path}: not a readable .pth file ({err}); re-download the checkpoint") from None
    if not isinstance(loaded, Mapping):
        raise CheckpointError(f"{path}: holds a {type(loaded).__name__}, not a state dict of tensors; {REFUSED}")
    others = [name for name, value in loaded.items() if not isinstance(value, torch.Tensor)]
    if others:
        raise CheckpointError(
            f"{path}: entries {others[:5]} are not tensors (a training checkpoint rather than a state "
            f"dict?); {REFUSED}"
        )
    return dict(loaded)


def _numpy_view(tensor: Any) -> np.ndarray:
    """A zero-copy numpy view of a CPU tensor; bfloat16 is viewed through its 16-bit pattern."""
    import torch

    if tensor.dtype == torch.bfloat16:
        return tensor.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return tensor.numpy()
