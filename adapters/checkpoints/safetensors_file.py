"""A safetensors file read straight from its mmap: header validated up front, tensors as views.

The header is checked completely before any tensor is touched (dtype, shape, offsets,
file length; the tensors must tile the data section exactly, as the safetensors library
requires), so a corrupt or truncated file is reported, with its path and the tensor at
fault, before expensive work starts. Tensors come back as read-only numpy views of
the mapped file; bf16 and fp8 map to ml_dtypes types, so no fp32 round trip happens.
A loader that reads each tensor once calls `release` after it, so the file's pages
leave the process's resident set as it goes (the kernel's page cache keeps them).
"""

from __future__ import annotations

import json
import math
import mmap
import os
import struct
import threading
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
MAX_HEADER_BYTES = 100_000_000  # the safetensors library's limit
REDOWNLOAD = "re-download or re-save the checkpoint"


@attrs.frozen
class TensorEntry:
    dtype: np.dtype
    shape: tuple[int, ...]
    begin: int  # byte offset into the data section
    end: int


@attrs.frozen
class FileIdentity:
    """What says a file is unchanged without reading it (keys of converted-weight caches)."""

    path: str
    size: int
    mtime_ns: int

    @classmethod
    def of(cls, path: Path) -> FileIdentity:
        stat = path.stat()
        return cls(str(path.resolve()), stat.st_size, stat.st_mtime_ns)


class SafetensorsFile:
    """One validated safetensors file; `tensor(name)` is a zero-copy view.

    The file is mapped on the first `tensor` call (under a lock: loaders read from
    several threads), so opening files only to validate them maps nothing.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.entries, self.metadata, self._data_start = _read_header(self.path)
        self._mmap: mmap.mmap | None = None
        self._data: np.ndarray | None = None  # uint8 view of the whole mapping
        self._lock = threading.Lock()

    @property
    def names(self) -> list[str]:
        return list(self.entries)

    def identity(self) -> FileIdentity:
        return FileIdentity.of(self.path)

    def tensor(self, name: str) -> np.ndarray:
        entry = self._entry(name)
        raw = self._mapped()[self._data_start + entry.begin : self._data_start + entry.end]
        return raw.view(entry.dtype).reshape(entry.shape)

    def release(self, name: str) -> None:
        """Unmaps the pages of tensor `name` from this process (MADV_DONTNEED).

        The mapping is read-only and file-backed, so nothing is lost: a later read of the
        tensor (or of a neighbour sharing a boundary page) faults the pages back in.
        """
        entry = self._entry(name)
        if self._mmap is None or not hasattr(mmap, "MADV_DONTNEED"):
            return
        start = self._data_start + entry.begin
        start -= start % mmap.PAGESIZE
        length = self._data_start + entry.end - start
        if length > 0:
            self._mmap.madvise(mmap.MADV_DONTNEED, start, length)

    def _entry(self, name: str) -> TensorEntry:
        entry = self.entries.get(name)
        if entry is None:
            raise CheckpointError(f"{self.path}: has no tensor {name!r}")
        return entry

    def _mapped(self) -> np.ndarray:
        with self._lock:
            if self._data is None:
                fd = os.open(self.path, os.O_RDONLY)
                try:
                    self._mmap = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
                finally:
                    os.close(fd)
                self._data = np.frombuffer(self._mmap, dtype=np.uint8)
            return self._data


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
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise CheckpointError(
            f"{path}: corrupt safetensors header: __metadata__ must map names to texts, got {metadata!r:.200}; {REDOWNLOAD}"
        )
    entries = {name: _entry(path, name, raw) for name, raw in header.items()}
    data_start = 8 + header_len
    cut = [name for name, e in entries.items() if data_start + e.end > size]
    if cut:
        first = min(cut, key=lambda name: entries[name].begin)
        raise CheckpointError(
            f"{path}: truncated safetensors file: tensor {first!r} (and {len(cut) - 1} more) ends past "
            f"the end; tensors need {data_start + max(entries[n].end for n in cut)} bytes, the file has "
            f"{size}; {REDOWNLOAD}"
        )
    _check_coverage(path, entries, size - data_start)
    return entries, metadata, data_start


def _check_coverage(path: Path, entries: dict[str, TensorEntry], data_bytes: int) -> None:
    """The tensors tile the data section exactly, in offset order, as the safetensors library
    requires: no byte shared by two tensors, none unclaimed, none after the last. A header length
    off by a few bytes shows up here (every tensor would be read from the wrong place)."""
    end, previous = 0, None
    for name, entry in sorted(entries.items(), key=lambda item: (item[1].begin, item[1].end)):
        if entry.begin < end:
            raise CheckpointError(
                f"{path}: corrupt safetensors header: tensors {previous!r} and {name!r} share bytes "
                f"{entry.begin}..{min(end, entry.end)}; {REDOWNLOAD}"
            )
        if entry.begin > end:
            raise CheckpointError(
                f"{path}: corrupt safetensors header: bytes {end}..{entry.begin} before tensor {name!r} "
                f"belong to no tensor; {REDOWNLOAD}"
            )
        end, previous = entry.end, name
    if end != data_bytes:
        raise CheckpointError(
            f"{path}: corrupt safetensors file: {data_bytes - end} byte(s) after the last tensor belong to no "
            f"tensor (a wrong header length, or data appended); {REDOWNLOAD}"
        )


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
