"""Loading the transformer(s) of a checkpoint: concurrently, through the converted-weights
cache when one is configured, onto the devices.

Wan 2.2 A14B's two experts are independent until sampling, so they load on two threads
(conversion releases the GIL; each expert's own conversion is threaded too). With a
cache, an expert whose entry exists is restored instead of converted; one that was
converted is saved once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor

import attrs
import jax
import numpy as np
from jax.typing import DTypeLike

from wanjax.adapters.checkpoints.weights import TensorFiles
from wanjax.adapters.jax.loading.placement import ShardedPlacement
from wanjax.adapters.jax.loading.staging import ReplicatedPlacement
from wanjax.adapters.jax.transformer.model import WanTransformer
from wanjax.adapters.jax.transformer.packed_weights import has_packed
from wanjax.adapters.jax.transformer.offload import BLOCKS, in_host_memory, put_in_host_memory
from wanjax.adapters.jax.transformer.runtime import TransformerRuntime
from wanjax.adapters.jax.transformer.weights import (
    abstract_transformer,
    convert_transformer_weights,
    set_parameters,
    storage_layout,
)
from wanjax.adapters.jax.loading.weights_cache import ConvertedWeightsCache, cache_key
from wanjax.domain.errors import ConfigError
from wanjax.domain.specs import TransformerSpec

@attrs.frozen(kw_only=True)
class ExpertLoading:
    """How experts load: runtime, fp8 kernel storage, placement (replicated, or each parameter
    with its own sharding on a mesh), an optional cache, and whether the blocks' weights go to
    host memory (`offload=layers`) as they are placed, so the device never holds them all, or
    every weight does (`all_in_host_memory`: `offload=components`, whose denoiser moves one expert
    to the device at a time)."""

    runtime: TransformerRuntime
    kernel_dtype: DTypeLike | None = None
    placement: ReplicatedPlacement | ShardedPlacement = attrs.field(factory=ReplicatedPlacement)
    cache: ConvertedWeightsCache | None = None
    blocks_in_host_memory: bool = False
    all_in_host_memory: bool = False

    def load(self, spec: TransformerSpec, tensors: Mapping[str, np.ndarray]) -> WanTransformer:
        """One transformer from its tensors (diffusers names), restored from the cache when
        it has an entry. Only file-backed tensors (`TensorFiles`) are cached: their files
        identify the entry."""
        model = abstract_transformer(spec, self.runtime)
        layout = storage_layout(model, self.kernel_dtype, tensors)
        packed = has_packed(layout)
        if packed and isinstance(self.placement, ShardedPlacement):
            raise ConfigError(
                "a quantized transformer file's kernels (GGUF blocks, scaled fp8) run on one device: set the mesh "
                "sizes to 1, or shard its bf16 release"
            )
        key = None
        if self.cache is not None and isinstance(tensors, TensorFiles) and not packed:  # GGUF: read as stored
            key = cache_key(tensors.identity(), layout, extra=(repr(spec), f"scan={self.runtime.scan_layers}"))
            restored = self.cache.restore(key, layout, self.placement.sharding)
            if restored is not None:
                return set_parameters(model, self._offloaded(restored))
        host = convert_transformer_weights(model, tensors, kernel_dtype=self.kernel_dtype)
        offloaded = {path for path in host if self._in_host_memory(path)}
        arrays = self.placement.put_all({path: a for path, a in host.items() if path not in offloaded})
        arrays |= {path: put_in_host_memory(host[path]) for path in offloaded}  # never on the device
        if key is not None:
            self.cache.save(key, arrays)
        return set_parameters(model, self._offloaded(arrays))

    def _in_host_memory(self, path: tuple) -> bool:
        return self.all_in_host_memory or (self.blocks_in_host_memory and path[0] == BLOCKS)

    def _offloaded(self, arrays: dict[tuple, jax.Array]) -> dict[tuple, jax.Array]:
        """The arrays that wait in host memory moved there (restored ones are placed on the device)."""
        return {path: jax.tree.map(in_host_memory, a) if self._in_host_memory(path) else a for path, a in arrays.items()}

    def load_all(self, spec: TransformerSpec, experts: Sequence[Mapping[str, np.ndarray]]) -> list[WanTransformer]:
        """Every expert from its tensors, concurrently (one thread each)."""
        if len(experts) == 1:
            return [self.load(spec, experts[0])]
        with ThreadPoolExecutor(max_workers=len(experts), thread_name_prefix="wanjax-expert") as pool:
            return list(pool.map(lambda tensors: self.load(spec, tensors), experts))
