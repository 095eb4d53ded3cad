"""LoRA files' factors on the device: each file read once, kept while the cache's byte budget allows.

A file is identified by its resolved path, size and modification time, so a file replaced on disk
is read again. The factors are float32 (what the load-time merge computes with), checked for
NaN/inf and fitted to the model's tensors as they are read.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Mapping
from pathlib import Path

import attrs
import jax
import jax.numpy as jnp
import numpy as np

from wanjax.adapters.lora import fitted_deltas, read_lora

FileIdentity = tuple[str, int, int]


def file_identity(path: str) -> FileIdentity:
    """(resolved path, size, modification time in ns): what makes a cached LoRA stale."""
    resolved = Path(path).expanduser().resolve()
    stat = resolved.stat() if resolved.is_file() else None
    return (str(resolved), stat.st_size, stat.st_mtime_ns) if stat else (str(resolved), -1, -1)


@attrs.frozen(eq=False)
class DeviceDelta:
    """One delta on the device: factor * up @ down (down None: factor * up), float32."""

    up: jax.Array
    down: jax.Array | None
    factor: np.float32


@attrs.frozen(eq=False)
class DeviceLora:
    """A LoRA file's deltas by the diffusers tensor they change, each target's in file order."""

    path: str
    deltas: Mapping[str, tuple[DeviceDelta, ...]]

    @property
    def nbytes(self) -> int:
        arrays = [a for ds in self.deltas.values() for d in ds for a in (d.up, d.down) if a is not None]
        return sum(a.nbytes for a in arrays)


class LoraFactorCache:
    """LoRAs on the device by file, least recently used dropped first beyond `capacity` bytes (one
    bigger than that is read for its merge and not kept). Not thread-safe: its owner serialises."""

    def __init__(self, shapes: Mapping[str, tuple[int, ...]], capacity: int) -> None:
        """`shapes`: the model's diffusers tensor names and torch shapes, which every file must fit."""
        self._shapes = shapes
        self.capacity = capacity
        self._entries: OrderedDict[FileIdentity, DeviceLora] = OrderedDict()
        self.files_read = 0

    @property
    def nbytes(self) -> int:
        return sum(entry.nbytes for entry in self._entries.values())

    def get(self, path: str) -> DeviceLora:
        """The LoRA at `path`, from the cache or read now; CheckpointError for a file that is
        missing, malformed, holds NaN/inf or does not fit the model."""
        key = file_identity(path)
        entry = self._entries.get(key)
        if entry is not None:
            self._entries.move_to_end(key)
            return entry
        entry = self._read(path)
        self.files_read += 1
        self._entries[key] = entry
        while self._entries and self.nbytes > self.capacity:
            self._entries.popitem(last=False)
        return entry

    def _read(self, path: str) -> DeviceLora:
        fitted = fitted_deltas(read_lora(Path(path)), self._shapes)
        deltas = {}
        for target, items in fitted.items():
            placed = []
            for delta in items:
                up, down = delta.factors()
                placed.append(DeviceDelta(jnp.asarray(up), None if down is None else jnp.asarray(down),
                                          np.float32(delta.factor)))  # fmt: skip
            deltas[target] = tuple(placed)
        return DeviceLora(path=os.fspath(path), deltas=deltas)
