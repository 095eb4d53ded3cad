"""A GGUF file's tensors (city96's and QuantStack's Wan releases), read with the `gguf` package.

The Wan GGUF releases hold the original Wan tensor names (`blocks.0.self_attn.q.weight`, ...) in
torch's layout: GGUF lists a tensor's dimensions innermost first, so the torch shape is that list
reversed; a tensor the converter had to flatten or cut into rows of 256 (a 5-D convolution, a row
length no block divides) carries its torch shape in a `comfy.gguf.orig_shape.<name>` field. The float
types (F32, F16, BF16) come back as zero-copy views of the mapped file; the quantized ones
(`domain.quantization.PACKED_BLOCKS`) come back dequantized on the host (`gguf.quants.dequantize`)
as any mapping's tensors, and also, through `packed`, as their blocks, which the transformer keeps
packed on the device (adapters/jax/transformer/packed_weights.py). Any other type is refused, by
name, when the file is opened.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Protocol, runtime_checkable

import ml_dtypes
import numpy as np

from wanjax.adapters.checkpoints.safetensors_file import FileIdentity
from wanjax.domain.errors import CheckpointError
from wanjax.domain.quantization import GGUF_TYPES, PACKED_BLOCKS

SUFFIX = ".gguf"
ORIGINAL_SHAPE = "comfy.gguf.orig_shape."


@runtime_checkable
class PackedTensors(Protocol):
    """Tensors some of which can also be read as GGUF blocks."""

    def block_type(self, name: str) -> str | None:
        """The packed block type `name` can be read in (`packed`), or None: read it as an array."""
        ...

    def packed(self, name: str) -> np.ndarray:
        """Tensor `name` [out, in] as its blocks, uint8 [out, in / block_size, type_size]."""
        ...

    def block_kernel_bytes(self) -> float | None:
        """Bytes per value of the transformer blocks' packed kernels (`blocks.*`), None if none is packed."""
        ...


class GgufWeights(Mapping[str, np.ndarray]):
    """Tensor name -> array over one GGUF file (see the module); opening checks every tensor's type."""

    def __init__(self, path: Path) -> None:
        import gguf

        self.path = Path(path)
        if not self.path.is_file():
            raise CheckpointError(f"weights not found: {self.path} does not exist")
        try:
            reader = gguf.GGUFReader(self.path, "r")
        except (ValueError, OSError, KeyError, IndexError) as err:
            raise CheckpointError(f"{self.path}: not a readable GGUF file ({err}); re-download it") from None
        self._tensors = {tensor.name: tensor for tensor in reader.tensors}
        self._shapes = {name: self._torch_shape(reader, tensor) for name, tensor in self._tensors.items()}
        unsupported = sorted({t.tensor_type.name for t in self._tensors.values()} - set(GGUF_TYPES))
        if unsupported:
            names = [n for n, t in self._tensors.items() if t.tensor_type.name in unsupported]
            raise CheckpointError(
                f"{self.path}: GGUF block type(s) {', '.join(unsupported)} are not supported (e.g. {names[0]!r}); "
                f"wanjax reads {', '.join(GGUF_TYPES)}: use a release in one of those"
            )

    def _torch_shape(self, reader: object, tensor: object) -> tuple[int, ...]:
        stored = tuple(int(n) for n in reversed(tensor.shape.tolist()))
        field = reader.get_field(ORIGINAL_SHAPE + tensor.name)
        if field is None:
            return stored
        shape = tuple(int(field.parts[i][0]) for i in field.data)
        if math.prod(shape) != math.prod(stored):
            raise CheckpointError(
                f"{self.path}: {tensor.name!r} is stored as {stored} but its {ORIGINAL_SHAPE}* field says {shape}; "
                "re-download the file"
            )
        return shape

    def shape(self, name: str) -> tuple[int, ...]:
        """Tensor `name`'s torch shape, from the header (nothing is read)."""
        return self._shapes[name]

    def type_of(self, name: str) -> str:
        """The GGUF type `name` is stored in: F32, F16, BF16 or a key of `PACKED_BLOCKS`."""
        return self._tensors[name].tensor_type.name

    def block_type(self, name: str) -> str | None:
        """The packed block type of a quantized 2-D tensor stored row by row (None otherwise)."""
        tensor, kind = self._tensors[name], self.type_of(name)
        stored = tuple(reversed(tensor.shape.tolist()))
        rows_kept = len(stored) == 2 and stored == self._shapes[name]
        return kind if kind in PACKED_BLOCKS and rows_kept else None

    def packed(self, name: str) -> np.ndarray:
        kind = self.block_type(name)
        if kind is None:
            raise KeyError(f"{name!r} is not stored as packed rows")
        out, inputs = self._shapes[name]
        size, type_size = PACKED_BLOCKS[kind]
        return self._tensors[name].data.reshape(out, inputs // size, type_size)

    def block_kernel_bytes(self) -> float | None:
        kernels = [n for n in self._tensors if n.startswith("blocks.") and self.block_type(n) is not None]
        values = sum(math.prod(self._shapes[n]) for n in kernels)
        return sum(int(self._tensors[n].n_bytes) for n in kernels) / values if kernels else None

    def locate(self, name: str) -> str:
        return f"{self.path}: {name!r}"

    def release(self, name: str) -> None:
        """Nothing to do: the reader's read-only mapping holds only the pages that were read."""

    def identity(self) -> tuple[FileIdentity, ...]:
        stat = os.stat(self.path)
        return (FileIdentity(str(self.path.resolve()), stat.st_size, stat.st_mtime_ns),)

    def byte_offset(self, name: str) -> tuple[str, int]:
        return self.path.name, int(self._tensors[name].data_offset)

    def parameter_count(self) -> int:
        return sum(math.prod(shape) for shape in self._shapes.values())

    def __getitem__(self, name: str) -> np.ndarray:
        if name not in self._tensors:
            raise KeyError(name)
        tensor, kind, shape = self._tensors[name], self.type_of(name), self._shapes[name]
        if kind == "BF16":
            return tensor.data.view(ml_dtypes.bfloat16).reshape(shape)
        if kind in ("F32", "F16"):
            return tensor.data.reshape(shape)
        import gguf

        return gguf.quants.dequantize(tensor.data, tensor.tensor_type).reshape(shape)

    def __contains__(self, name: object) -> bool:  # without reading (dequantizing) the tensor
        return name in self._tensors

    def __iter__(self) -> Iterator[str]:
        return iter(self._tensors)

    def __len__(self) -> int:
        return len(self._tensors)
