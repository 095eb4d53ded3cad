"""Host arrays -> device arrays, each with its own NamedSharding (the sharded counterpart of
`staging.ReplicatedPlacement`), staged through the interconnect where that saves host-link bytes.

`device_put(x, NamedSharding)` sends every device its own shard over its host link, so a
weight split over the whole mesh crosses the host links once. A weight replicated over some
axes (split over "fsdp" only, say, and replicated over "tensor") would cross them once per
replica; staged, its first axis is split over those replica axes too, so each device's link
carries 1/N, and an identity jit whose output sharding is the target all-gathers the pieces
over the interconnect (NVLink, ICI), far faster than the host links. The result is the same
array, bit for bit; only the route differs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping
from typing import TypeVar

import jax
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec

from wanjax.adapters.jax.staging import STAGE_MIN_BYTES

K = TypeVar("K", bound=Hashable)


def _identity(x: jax.Array) -> jax.Array:
    """Jitted with an output sharding, the on-device reshard."""
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


class ShardedPlacement:
    """Puts each host array, by key (a parameter path), with `shardings[key]`."""

    def __init__(self, shardings: Mapping[K, NamedSharding], *, min_bytes: int = STAGE_MIN_BYTES) -> None:
        self._shardings = dict(shardings)
        self._min_bytes = min_bytes
        self._reshard: dict[NamedSharding, Callable[[jax.Array], jax.Array]] = {}

    @property
    def sharding(self) -> Mapping[K, NamedSharding]:
        """Where each array ends up, by key (what a weights-cache restore places them with)."""
        return self._shardings

    def put(self, key: K, array: np.ndarray) -> jax.Array:
        target = self._shardings[key]
        staged = staged_sharding(target, array.shape) if array.nbytes >= self._min_bytes else None
        if staged is None:
            return jax.device_put(array, target)
        if target not in self._reshard:
            self._reshard[target] = jax.jit(_identity, out_shardings=target)
        return self._reshard[target](jax.device_put(array, staged))

    def put_all(self, arrays: Mapping[K, np.ndarray]) -> dict[K, jax.Array]:
        return {key: self.put(key, array) for key, array in arrays.items()}
