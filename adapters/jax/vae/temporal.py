"""Running a causal VAE half over time in chunks, carrying its feature cache.

The first frame always runs alone (the VAE treats it specially: no temporal
up/downsampling, zero-padded shortcuts). The rest runs either unrolled in Python, as
diffusers does, or under one `lax.scan` whose carry is the cache. Scanning pads the
frame axis with zeros to whole chunks (a static amount) and trims the output: every
layer is causal in time, so padding at the end never reaches earlier outputs. The
scan body's size depends only on the chunk, not on the frame count.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

from wanjax.adapters.jax.vae.blocks import Cache
from wanjax.adapters.jax.vae.sharding import Constrain

Step = Callable[[jax.Array, Cache], tuple[jax.Array, Cache]]
"""One chunk [B, T, ...] and the previous cache (None first) -> (output [B, T', ...], next cache)."""


def stream_unrolled(step: Step, x: jax.Array, size: int) -> jax.Array:
    """Frame 0 alone, then `size` frames per step, in a Python loop: x [B, F, ...] -> [B, F', ...]."""
    out, cache = step(x[:, :1], None)
    outs = [out]
    for start in range(1, x.shape[1], size):
        out, cache = step(x[:, start : start + size], cache)
        outs.append(out)
    return jnp.concatenate(outs, axis=1)


def stream_scanned(step: Step, x: jax.Array, size: int) -> jax.Array:
    """Frame 0 alone, then `size` frames per `lax.scan` step: x [B, F, ...] -> [B, F', ...].

    `size` must keep the step's frame ratio whole (a multiple of 4 pixel frames when
    encoding); it is cut to the frames after the first when there are fewer. The
    result equals `stream_unrolled(step, x, size)`.
    """
    first, cache = step(x[:, :1], None)
    rest = x[:, 1:]
    frames = rest.shape[1]
    if frames == 0:
        return first
    size = min(size, frames)  # a chunk longer than the video would only add padding
    steps = -(-frames // size)
    padding = [(0, 0), (0, steps * size - frames)] + [(0, 0)] * (x.ndim - 2)
    chunks = jnp.pad(rest, padding).reshape(x.shape[0], steps, size, *x.shape[2:])
    chunks = jnp.moveaxis(chunks, 1, 0)  # [S, B, size, ...]

    def body(carry: Cache, chunk: jax.Array) -> tuple[Cache, jax.Array]:
        out, carry = step(chunk, carry)
        return carry, out

    _, outs = jax.lax.scan(body, cache, chunks)  # [S, B, out_size, ...]
    out_size = outs.shape[2]
    outs = jnp.moveaxis(outs, 0, 1).reshape(x.shape[0], steps * out_size, *outs.shape[3:])
    return jnp.concatenate([first, outs[:, : frames * out_size // size]], axis=1)


def _pinned(step: Step, constrain: Constrain) -> Step:
    """`step` with `constrain` (a layout pin, see `sharding.py`) on its chunk, cache and output."""

    def run(x: jax.Array, cache: Cache) -> tuple[jax.Array, Cache]:
        out, cache = step(constrain(x), constrain(cache))
        return constrain(out), constrain(cache)

    return run


def stream(
    step: Step, x: jax.Array, *, chunk: int | None, unrolled_size: int, constrain: Constrain | None = None
) -> jax.Array:
    """`stream_scanned` with `chunk` frames per step, or diffusers' unrolled schedule when None.

    `constrain` pins the layout of every chunk's input, output and cache (the scan's carry)."""
    if constrain is not None:
        step = _pinned(step, constrain)
    if chunk is None:
        return stream_unrolled(step, x, unrolled_size)
    return stream_scanned(step, x, chunk)
