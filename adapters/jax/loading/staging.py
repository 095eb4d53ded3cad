"""Host buffers -> device arrays with a target sharding, staged through the device interconnect.

`device_put(x, sharding)` sends each device its own shard over its host link, so a weight
replicated over N devices (or over some mesh axes) crosses the host links once per replica:
N times its bytes over PCIe (or the TPU host link). Staged, the weight's first axis is also
split over the axes it is replicated over, so each link carries 1/N, and an identity jit
whose output sharding is the target all-gathers the pieces over the interconnect (NVLink,
ICI), far faster than the host links. The result is the same array, bit for bit; only the
route differs. `ReplicatedPlacement` puts everything whole on every device;
`sharding.placement.ShardedPlacement` gives each weight its own sharding.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import TypeVar

import jax
import numpy as np
from jax.sharding import AbstractMesh, Mesh, NamedSharding, PartitionSpec, Sharding

K = TypeVar("K", bound=Hashable)

STAGE_MIN_BYTES = 1 << 20  # below this, one more dispatch costs more than the bytes saved
AXIS = "stage"


def _resharded(x: jax.Array) -> jax.Array:
    """The identity; jitted with an output sharding it is the on-device all-gather."""
    return x


def _axes(entry: str | tuple[str, ...] | None) -> tuple[str, ...]:
    return () if entry is None else entry if isinstance(entry, tuple) else (entry,)


def staged_sharding(target: NamedSharding, shape: tuple[int, ...]) -> NamedSharding | None:
    """`target` with its first axis also split over the mesh axes it is replicated over, or
    None when there are none (nothing to save) or the first axis does not split evenly."""
    mesh = target.mesh
    spec = [*target.spec, *(None,) * (len(shape) - len(target.spec))]
    used = {axis for entry in spec for axis in _axes(entry)}
    replica_axes = tuple(a for a in mesh.axis_names if a not in used and mesh.shape[a] > 1)
    if not shape or not replica_axes:
        return None
    first = (*_axes(spec[0]), *replica_axes)
    if shape[0] % math.prod(mesh.shape[a] for a in first):
        return None
    return NamedSharding(mesh, PartitionSpec(first, *spec[1:]))


def is_staged(shape: tuple[int, ...], itemsize: int, num_devices: int, min_bytes: int = STAGE_MIN_BYTES) -> bool:
    """Whether an array of `shape` replicated over `num_devices` goes the staged route: several
    devices, large enough, and a first axis that splits evenly over them."""
    nbytes = int(np.prod(shape, dtype=np.int64)) * itemsize
    replicated = NamedSharding(AbstractMesh((num_devices,), (AXIS,)), PartitionSpec())
    return nbytes >= min_bytes and staged_sharding(replicated, shape) is not None


class StagedTransfer:
    """Puts host arrays with a target NamedSharding, staged where `staged_sharding` saves host-link
    bytes and the array holds at least `min_bytes`; one reshard executable per target."""

    def __init__(self, min_bytes: int = STAGE_MIN_BYTES) -> None:
        self._min_bytes = min_bytes
        self._reshard: dict[NamedSharding, Callable[[jax.Array], jax.Array]] = {}

    def put(self, array: np.ndarray, target: NamedSharding) -> jax.Array:
        staged = staged_sharding(target, array.shape) if array.nbytes >= self._min_bytes else None
        if staged is None:
            return jax.device_put(array, target)
        if target not in self._reshard:
            self._reshard[target] = jax.jit(_resharded, out_shardings=target)
        return self._reshard[target](jax.device_put(array, staged))


class ReplicatedPlacement:
    """Puts host arrays on `devices`, replicated; `devices=None` is the default device,
    with arrays left uncommitted as `jax.device_put(x)` leaves them (jit may then move
    them next to committed arguments)."""

    def __init__(self, devices: Sequence[jax.Device] | None = None, *, min_bytes: int = STAGE_MIN_BYTES) -> None:
        self._replicated: Sharding | None = None
        if devices is not None:
            self._replicated = NamedSharding(Mesh(np.array(tuple(devices)), (AXIS,)), PartitionSpec())
        self._transfer = StagedTransfer(min_bytes)

    @property
    def sharding(self) -> Sharding | None:
        """Where the arrays end up (None: the default device, uncommitted)."""
        return self._replicated

    def put(self, array: np.ndarray) -> jax.Array:
        if self._replicated is None:
            return jax.device_put(array)
        return self._transfer.put(array, self._replicated)

    def put_all(self, arrays: Mapping[K, np.ndarray]) -> dict[K, jax.Array]:
        """Each array put; a pytree of arrays (a packed GGUF kernel) leaf by leaf."""
        return {key: jax.tree.map(self.put, array) for key, array in arrays.items()}
