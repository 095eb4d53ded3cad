"""Host arrays -> device arrays, each with its own NamedSharding: the sharded counterpart of
`staging.ReplicatedPlacement`, through the same staged transfer (a weight replicated over some
mesh axes crosses the host links split over those axes too, then all-gathers on device)."""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import TypeVar

import jax
import numpy as np
from jax.sharding import NamedSharding

from wanjax.adapters.jax.loading.staging import STAGE_MIN_BYTES, StagedTransfer

K = TypeVar("K", bound=Hashable)


class ShardedPlacement:
    """Puts each host array, by key (a parameter path), with `shardings[key]`."""

    def __init__(self, shardings: Mapping[K, NamedSharding], *, min_bytes: int = STAGE_MIN_BYTES) -> None:
        self._shardings = dict(shardings)
        self._transfer = StagedTransfer(min_bytes)

    @property
    def sharding(self) -> Mapping[K, NamedSharding]:
        """Where each array ends up, by key (what a weights-cache restore places them with)."""
        return self._shardings

    def put(self, key: K, array: np.ndarray) -> jax.Array:
        return self._transfer.put(array, self._shardings[key])

    def put_all(self, arrays: Mapping[K, np.ndarray]) -> dict[K, jax.Array]:
        return {key: self.put(key, array) for key, array in arrays.items()}
