"""Where a component's weights wait between its uses (`offload=components`, domain/offload.py).

A component built `off_device` keeps its weights in pinned host memory (JAX's `pinned_host`
memory kind, which the CPU backend has too) and copies them to the device for the length of one
use (`working`); the device copy is freed when the caller drops it. The copies are exact, so the
component computes the same values, bit for bit.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import attrs
import jax

HOST_MEMORY = "pinned_host"
DEVICE_MEMORY = "device"

Tree = TypeVar("Tree")
Path = tuple[Any, ...]


def in_host_memory(array: jax.Array) -> jax.Array:
    """`array` in pinned host memory, with its own sharding otherwise (a copy only where needed)."""
    if array.sharding.memory_kind == HOST_MEMORY:
        return array
    return jax.device_put(array, array.sharding.with_memory_kind(HOST_MEMORY))


def on_device(array: jax.Array) -> jax.Array:
    """`array` in device memory, with its own sharding otherwise (a copy only where needed)."""
    if array.sharding.memory_kind == DEVICE_MEMORY:
        return array
    return jax.device_put(array, array.sharding.with_memory_kind(DEVICE_MEMORY))


def _nowhere(path: Path) -> bool:
    return False


@attrs.frozen
class Residency:
    """How one component's weights (a pytree of arrays) are placed: `off_device`, in host memory
    between uses and on the device while working; else on the device throughout. Leaves for which
    `stays_in_host(path)` holds remain in host memory even while working (the transformer blocks'
    weights with `offload=all`, which the layer scan streams in itself)."""

    off_device: bool = False
    stays_in_host: Callable[[Path], bool] = _nowhere

    def at_rest(self, weights: Tree) -> Tree:
        """`weights` where they wait between uses (moved to host memory if `off_device`)."""
        return jax.tree.map(in_host_memory, weights) if self.off_device else weights

    def working(self, weights: Tree) -> Tree:
        """`weights` placed for one use: a device copy of each leaf held off the device (but those that
        stay in host memory); the caller drops it when the use ends."""
        if not self.off_device:
            return weights
        place = lambda path, a: a if self.stays_in_host(path) else on_device(a)  # noqa: E731
        return jax.tree_util.tree_map_with_path(place, weights)

    def working_shapes(self, weights: Tree) -> Tree:
        """`working(weights)` as shapes with their shardings, to compile for without copying anything."""

        def shape(path: Path, a: jax.Array) -> jax.ShapeDtypeStruct:
            kind = HOST_MEMORY if self.stays_in_host(path) else DEVICE_MEMORY
            return jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=a.sharding.with_memory_kind(kind))

        return jax.tree_util.tree_map_with_path(shape, weights) if self.off_device else weights


RESIDENT = Residency()
"""On the device for the whole run (`offload=none` or `layers`)."""
