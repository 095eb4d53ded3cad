"""A contiguous range of a scanned block stack, run in place: blocks [start, stop) of the stacked
weights ([layers, ...]), each iteration indexing its block's weights and per-layer inputs out of
the whole stack, so running a range copies none of it (a step cache that runs the blocks in
ranges, DBCache, would otherwise hold a second copy of most of the weights); with the weights in
host memory (`offload=layers`), each block is fetched as `offload.scan_streamed` fetches it."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import jax
import jax.numpy as jnp
from flax import nnx

from wanjax.adapters.jax.transformer.offload import scan_streamed

Block = TypeVar("Block", bound=nnx.Module)


def layers_of(layers: slice, count: int) -> tuple[int, int]:
    """[start, stop) of a stack of `count` blocks that `layers` (Python slice semantics, negative
    ends counted from the last block) selects; empty ranges give start == stop."""
    start, stop, stride = layers.indices(count)
    if stride != 1:
        raise ValueError(f"layers={layers}: a range of blocks runs every block in it, in order (no stride)")
    return start, max(start, stop)


def at_layer(stacked: object, i: jax.Array | int) -> object:
    """Entry i of every [layers, ...] array of `stacked` (i traced or not)."""
    return jax.tree.map(lambda a: jax.lax.dynamic_index_in_dim(jnp.asarray(a), i, keepdims=False), stacked)


def scan_layer_range(
    blocks: Block,
    body: Callable[[Block, jax.Array, jax.Array], jax.Array],
    x: jax.Array,
    start: int,
    stop: int,
    *,
    stream: bool = False,
) -> jax.Array:
    """x through blocks [start, stop) of the stacked `blocks` in order: x = body(block_i, x, i);
    `stream`: their weights are in host memory (`offload.scan_streamed`)."""
    indices = jnp.arange(start, stop)
    if stream:
        streamed = lambda block, x, i: (body(block, x, i), None)  # noqa: E731
        return scan_streamed(blocks, streamed, x, indices, layers=(start, stop))[0]
    graphdef, weights = nnx.split(blocks)

    def step(x: jax.Array, i: jax.Array) -> tuple[jax.Array, None]:
        return body(nnx.merge(graphdef, at_layer(weights, i)), x, i), None

    return jax.lax.scan(step, x, indices)[0]
