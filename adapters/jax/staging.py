"""Host buffers -> device arrays replicated over a set of devices, staged through the
device interconnect.

A direct replicated `device_put` sends a parameter's full bytes over every device's
host link: N devices, N times the bytes over PCIe (or the TPU host link). Staged, the
parameter goes over as N slices along its first axis, one per device (each link
carries 1/N), and an identity jit whose output sharding is replicated all-gathers the
slices over the interconnect (NVLink, ICI), which is far faster than the host links.
The result is the same array, bit for bit; only the route differs.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import TypeVar

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec, Sharding

K = TypeVar("K", bound=Hashable)

STAGE_MIN_BYTES = 1 << 20  # below this, one more dispatch costs more than the bytes saved
AXIS = "stage"


def _on_every_device(x: jax.Array) -> jax.Array:
    """The identity; jitted with a replicated output sharding it is the on-device all-gather."""
    return x


def is_staged(shape: tuple[int, ...], itemsize: int, num_devices: int, min_bytes: int = STAGE_MIN_BYTES) -> bool:
    """Whether an array of `shape` goes the staged route: several devices, large enough,
    and a first axis that splits evenly over them."""
    nbytes = int(np.prod(shape, dtype=np.int64)) * itemsize
    return num_devices > 1 and len(shape) > 0 and shape[0] % num_devices == 0 and nbytes >= min_bytes


class ReplicatedPlacement:
    """Puts host arrays on `devices`, replicated; `devices=None` is the default device,
    with arrays left uncommitted as `jax.device_put(x)` leaves them (jit may then move
    them next to committed arguments)."""

    def __init__(self, devices: Sequence[jax.Device] | None = None, *, min_bytes: int = STAGE_MIN_BYTES) -> None:
        self._devices = None if devices is None else tuple(devices)
        self._min_bytes = min_bytes
        if self._devices is not None:
            mesh = Mesh(np.array(self._devices), (AXIS,))
            self._replicated: Sharding = NamedSharding(mesh, PartitionSpec())
            self._split = NamedSharding(mesh, PartitionSpec(AXIS))
            self._gather = jax.jit(_on_every_device, out_shardings=self._replicated)

    @property
    def sharding(self) -> Sharding | None:
        """Where the arrays end up (None: the default device, uncommitted)."""
        return None if self._devices is None else self._replicated

    def put(self, array: np.ndarray) -> jax.Array:
        if self._devices is None:
            return jax.device_put(array)
        if is_staged(array.shape, array.dtype.itemsize, len(self._devices), self._min_bytes):
            return self._gather(jax.device_put(array, self._split))
        return jax.device_put(array, self._replicated)

    def put_all(self, arrays: Mapping[K, np.ndarray]) -> dict[K, jax.Array]:
        return {key: self.put(array) for key, array in arrays.items()}
