"""`offload=layers`: the transformer blocks' weights in host memory, streamed to the device.

The scanned block stack's parameters ([layers, ...] each) live in pinned host memory (JAX's
`pinned_host` memory kind). `scan_streamed` runs the blocks as a `lax.scan` whose carry holds
one block's weights already on the device: each iteration starts the copy of the next block's
weights and runs the current block, two computations with no data between them, so XLA may
overlap the host-to-device copy with the block's compute. The device then holds two blocks'
weights at a time instead of all of them. The arithmetic is the block's own, on the same
values: latents are those of the resident model, bit for bit (tests/unit/test_offload.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.sharding import SingleDeviceSharding

from wanjax.adapters.jax.platform.residency import HOST_MEMORY, in_host_memory

BLOCKS = "blocks"  # the top-level name of the scanned block stack in a WanTransformer's state

Block = TypeVar("Block", bound=nnx.Module)
Carry = TypeVar("Carry")


def put_in_host_memory(array: np.ndarray) -> jax.Array:
    """A host buffer as a JAX array in the first device's pinned host memory (one device only)."""
    return jax.device_put(array, SingleDeviceSharding(jax.devices()[0], memory_kind=HOST_MEMORY))


def blocks_in_host_memory(params: nnx.State) -> nnx.State:
    """A transformer's state with its blocks' weights moved to host memory, the rest as it is."""
    return jax.tree_util.tree_map_with_path(lambda path, a: in_host_memory(a) if in_blocks(path) else a, params)


def in_blocks(path: tuple) -> bool:
    """Whether a transformer state's leaf at `path` is one of the scanned blocks' weights."""
    return getattr(path[0], "key", None) == BLOCKS


def _on_device(array: jax.Array) -> jax.Array:
    return jax.device_put(array, jax.memory.Space.Device)


def scan_streamed(
    blocks: Block,
    body: Callable[[Block, Carry, object], tuple[Carry, object]],
    carry: Carry,
    xs: object,
    *,
    layers: tuple[int, int] | None = None,
) -> tuple[Carry, object]:
    """`lax.scan` of `body(block_i, carry, xs_i) -> (carry, y_i)` over the stacked `blocks`
    (weights [layers, ...] in host memory), in order, returning (carry, ys stacked [layers, ...]);
    block i + 1's weights are copied to the device while block i runs. The last iteration fetches
    the last block again: `layers + 1` blocks move per call. `layers`: only blocks [start, stop)
    (xs then [stop - start, ...])."""
    graphdef, weights = nnx.split(blocks)
    start, stop = (0, jax.tree.leaves(weights)[0].shape[0]) if layers is None else layers

    def fetch(i: jax.Array) -> nnx.State:
        return jax.tree.map(lambda a: _on_device(jax.lax.dynamic_index_in_dim(a, i, keepdims=False)), weights)

    def step(state: tuple[Carry, nnx.State], per_layer: tuple[jax.Array, object]) -> tuple[tuple, object]:
        carry, current = state
        i, x = per_layer
        upcoming = fetch(jnp.minimum(i + 1, stop - 1))
        carry, y = body(nnx.merge(graphdef, current), carry, x)
        return (carry, upcoming), y

    (carry, _), ys = jax.lax.scan(step, (carry, fetch(jnp.int32(start))), (jnp.arange(start, stop), xs))
    return carry, ys
