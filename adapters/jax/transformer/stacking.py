"""A stack of identical transformer blocks in either layout: scanned (one module whose
parameters have a leading "layers" axis [L, ...], run with `nnx.scan`) or a Python list of
blocks; what both layouts compute per block outside the residual stream (the
cross-attention K/V of each block, stacked [L, ...]: the KV cache); and an extension's stack
member run by slot after a base block (`with_slot`: Animate's face adapters, S2V's audio injectors)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import jax
import jax.numpy as jnp
from flax import nnx

from wanjax.adapters.jax.transformer.blocks import CrossAttentionKV, WanBlock
from wanjax.adapters.jax.transformer.offload import scan_streamed

Block = TypeVar("Block", bound=WanBlock)


def block_stack(
    build: Callable[[nnx.Rngs], Block], count: int, *, scan_layers: bool, rngs: nnx.Rngs
) -> Block | nnx.List:
    """`count` blocks made by `build`: stacked into one module (`scan_layers`) or a list.

    Both layouts are built stacked, the list by slicing, so they get the same initial
    values, and `nnx.eval_shape` stays linear in `count`: in flax 0.12 every Rngs draw
    under a trace walks the whole trace so far (a 14B model took ~30 s to trace one by
    one). The blocks carry no sharding metadata yet; once they do, slicing must also
    drop the "layers" axis name from it.
    """

    @nnx.split_rngs(splits=count)
    @nnx.vmap(in_axes=(0,), out_axes=0, transform_metadata={nnx.PARTITION_NAME: "layers"})
    def stacked(rngs: nnx.Rngs) -> Block:
        return build(rngs)

    blocks = stacked(rngs)
    if scan_layers:
        return blocks
    graphdef, state = nnx.split(blocks)
    layers = (jax.tree.map(lambda a, i=i: a[i], state) for i in range(count))
    return nnx.List([nnx.merge(graphdef, layer) for layer in layers])


def stacked_key_values(
    blocks: WanBlock | nnx.List, text: jax.Array, image: jax.Array | None, *, stream: bool = False
) -> CrossAttentionKV:
    """Every block's cross-attention K/V of the embedded text [B, L, D] (and image tokens
    [B, M, D]), stacked [layers, B, L, N, H] whichever the layout; `stream`: the scanned
    blocks' weights are in host memory (`offload.scan_streamed`).

    Every layout computes them one block at a time, as `stream` must, so each block's
    projections are the same [tokens, D] x [D, N] dots: a `vmap` over the blocks would let XLA
    merge all blocks' projections of the shared text into one wider dot, whose CPU kernel
    (without YNNPACK, `platform.compiled.xla_options`) rounds differently, and streamed
    latents would no longer equal resident ones bit for bit."""
    if stream:

        def per_layer(block: WanBlock, carry: None, x: None) -> tuple[None, CrossAttentionKV]:
            return None, block.cross_key_values(text, image)

        return scan_streamed(blocks, per_layer, None, None)[1]
    if isinstance(blocks, nnx.List):
        per_layer = [block.cross_key_values(text, image) for block in blocks]
        return jax.tree.map(lambda *layers: jnp.stack(layers), *per_layer)

    @nnx.scan(in_axes=(0, None, None), out_axes=0)
    def per_block(block: WanBlock, text: jax.Array, image: jax.Array | None) -> CrossAttentionKV:
        return block.cross_key_values(text, image)

    return per_block(blocks, text, image)


def layer(stacked: CrossAttentionKV, index: int) -> CrossAttentionKV:
    """One block's K/V out of the stacked [layers, ...] cache."""
    return jax.tree.map(lambda a: a[index], stacked)


def with_slot(
    x: jax.Array, stack: nnx.Module, slot: jax.Array | int, apply: Callable[[nnx.Module, jax.Array], jax.Array]
) -> jax.Array:
    """`apply(member, x)` for member `slot` of `stack` (stacked [K, ...] or a list), or x itself
    where slot < 0; `slot` a traced (inside the scanned blocks: picked by index) or Python int."""
    if isinstance(stack, nnx.List):
        return x if slot < 0 else apply(stack[slot], x)
    graphdef, state = nnx.split(stack)

    def applied() -> jax.Array:
        return apply(nnx.merge(graphdef, jax.tree.map(lambda a: a[jnp.maximum(slot, 0)], state)), x)

    return jax.lax.cond(slot >= 0, applied, lambda: x)
