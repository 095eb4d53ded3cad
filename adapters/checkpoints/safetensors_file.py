"""A safetensors file read straight from its mmap: header validated up front, tensors as views.

The header is checked completely before any tensor is touched (dtype, shape, offsets,
file length), so a corrupt or truncated file is reported, with its path and the tensor
at fault, before expensive work starts. Tensors come back as read-only numpy views of
the mapped file; bf16 and fp8 map to ml_dtypes types, so no fp32 round trip happens.
"""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path

import attrs
import ml_dtypes
import numpy as np

from wanjax.domain.errors import CheckpointError

NUMPY_DTYPES: dict[str, np.dtype] = {
    "F64": np.dtype(np.float64),
    "F32": np.dtype(np.float32),
    "F16": np.dtype(np.float16),
    "BF16": np.dtype(ml_dtypes.bfloat16),
    "F8_E4M3": np.dtype(ml_dtypes.float8_e4m3fn),
    "F8_E5M2": np.dtype(ml_dtypes.float8_e5m2),
    "I64": np.dtype(np.int64),
    "I32": np.dtype(np.int32),
    "I16": np.dtype(np.int16),
    "I8": np.dtype(np.int8),
    "U8": np.dtype(np.uint8),
    "BOOL": np.dtype(np.bool_),
}
MAX_HEADER_BYTES = 100 * 2**20
REDOWNLOAD = "re-download or re-save the checkpoint"


@attrs.frozen
class TensorEntry:
    dtype: np.dtype
    shape: tuple[int, ...]
    begin: int  # byte offset into the data section
    end: int


class SafetensorsFile:
    """One validated safetensors file; `tensor(name)` is a zero-copy view."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.entries, self.metadata, self._data_start = _read_header(self.path)
        self._mmap: np.memmap | None = None

    @property
    def names(self) -> list[str]:
        return list(self.entries)

    def tensor(self, name: str) -> np.ndarray:
        entry = self.entries.get(name)
        if entry is None:
            raise CheckpointError(f"{self.path}: has no tensor {name!r}")
        if self._mmap is None:
            self._mmap = np.memmap(self.path, dtype=np.uint8, mode="r")
        raw = self._mmap[self._data_start + entry.begin : self._data_start + entry.end]
        return raw.view(entry.dtype).reshape(entry.shape)


def _read_header(path: Path) -> tuple[dict[str, TensorEntry], dict[str, str], int]:
    if not path.is_file():
        raise CheckpointError(f"safetensors file not found: {path}; {REDOWNLOAD}")
    size = path.stat().st_size
    with path.open("rb") as f:
        prefix = f.read(8)
        if len(prefix) < 8:
            raise CheckpointError(f"{path}: corrupt safetensors file ({size} bytes, no header); {REDOWNLOAD}")
        (header_len,) = struct.unpack("<Q", prefix)
        if header_len > MAX_HEADER_BYTES or 8 + header_len > size:
            raise CheckpointError(
                f"{path}: corrupt safetensors header (declares {header_len} header bytes in a "
                f"{size}-byte file); {REDOWNLOAD}"
            )
        try:
            header = json.loads(f.read(header_len))
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise CheckpointError(f"{path}: corrupt safetensors header ({err}); {REDOWNLOAD}") from None
    if not isinstance(header, dict):
        raise CheckpointError(f"{path}: corrupt safetensors header (not a JSON object); {REDOWNLOAD}")
    metadata = header.pop("__metadata__", None) or {}
    entries = {name: _entry(path, name, raw) for name, raw in header.items()}
    data_start = 8 + header_len
    data_end = max((e.end for e in entries.values()), default=0)
    if data_start + data_end > size:
        raise CheckpointError(
            f"{path}: truncated safetensors file: tensors need {data_start + data_end} bytes, "
            f"the file has {size}; {REDOWNLOAD}"
        )
    return entries, metadata, data_start


def _entry(path: Path, name: str, raw: object) -> TensorEntry:
    try:
        dtype = NUMPY_DTYPES[raw["dtype"]]  # type: ignore[index]
        shape = tuple(int(d) for d in raw["shape"])  # type: ignore[index]
        begin, end = (int(o) for o in raw["data_offsets"])  # type: ignore[index]
    except (KeyError, TypeError, ValueError):
        raise CheckpointError(
            f"{path}: corrupt safetensors entry for tensor {name!r}: {raw!r}; {REDOWNLOAD}"
        ) from None
    if min(shape, default=0) < 0 or begin < 0 or end - begin != math.prod(shape) * dtype.itemsize:
        raise CheckpointError(
            f"{path}: corrupt safetensors entry for tensor {name!r} (shape {shape}, "
            f"{raw['dtype']}, bytes {begin}..{end}); {REDOWNLOAD}"  # type: ignore[index]
        )
    return TensorEntry(dtype=dtype, shape=shape, begin=begin, end=end)
