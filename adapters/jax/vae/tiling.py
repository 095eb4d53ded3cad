"""Spatial tiling with overlap and linear blending, as diffusers' AutoencoderKLWan does it.

Tiles are cut from the input on a regular grid (edge tiles are smaller, never
padded: zero padding would change what the convolutions see at the border), each
is mapped on its own, and each output tile is blended into its upper and left
neighbours over their overlap, then cropped to the stride. Blending uses already
blended neighbours, as diffusers' in-place loop does. Tiles of one shape run under
one `lax.map`, so a grid compiles at most four bodies (interior, right, bottom,
corner) and holds one tile's activations at a time.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs
import jax
import jax.numpy as jnp
import numpy as np

from wanjax.adapters.jax.vae.runtime import VaeTiling
from wanjax.domain.specs import VaeSpec


@attrs.frozen
class AxisTiles:
    """One spatial axis of a tile grid: input tiles, and how output tiles are blended and cropped."""

    tile: int  # input positions per tile
    stride: int  # input positions between tile starts
    blend: int  # output positions blended with the previous tile
    out_stride: int  # output positions kept per tile
    out_size: int  # output positions in all

    def starts(self, size: int) -> range:
        return range(0, size, self.stride)


Grid = tuple[AxisTiles, AxisTiles]  # rows, columns


def _sample_tiles(tiling: VaeTiling) -> tuple[tuple[int, int], tuple[int, int]]:
    """(tile, stride) in video pixels for rows, then columns."""
    return (
        (tiling.tile_sample_min_height, tiling.tile_sample_stride_height),
        (tiling.tile_sample_min_width, tiling.tile_sample_stride_width),
    )


def decode_tiles(tiling: VaeTiling, spec: VaeSpec, height: int, width: int) -> Grid | None:
    """diffusers' `tiled_decode` grid for latents of `height` x `width`, or None when one tile covers it.

    Output positions are decoder pixels, before unpatchify (the blend happens there).
    """
    ratio, patch = spec.spatial_compression, spec.patch
    rows, cols = (
        AxisTiles(
            tile // ratio, stride // ratio, tile // patch - stride // patch, stride // patch, size * ratio // patch
        )
        for size, (tile, stride) in zip((height, width), _sample_tiles(tiling))
    )
    if height <= rows.tile and width <= cols.tile:
        return None
    return rows, cols


def encode_tiles(tiling: VaeTiling, spec: VaeSpec, height: int, width: int) -> Grid | None:
    """diffusers' `tiled_encode` grid for video of `height` x `width` pixels, or None when untiled.

    Input positions are patchified pixels: diffusers cuts tiles of `tile_sample_min_*`
    positions after patchify, so a Wan 2.2 tile spans twice as many video pixels.
    """
    if height <= tiling.tile_sample_min_height and width <= tiling.tile_sample_min_width:
        return None
    ratio, patch = spec.spatial_compression // spec.patch, spec.patch
    rows, cols = (
        AxisTiles(tile, stride, tile // ratio - stride // ratio, stride // ratio, size // patch // ratio)
        for size, (tile, stride) in zip((height, width), _sample_tiles(tiling))
    )
    return rows, cols


def _blend(previous: jax.Array, tile: jax.Array, extent: int, axis: int) -> jax.Array:
    """Fades `tile`'s first `extent` positions along `axis` in from `previous`'s last ones."""
    extent = min(previous.shape[axis], tile.shape[axis], extent)
    if extent == 0:
        return tile
    # diffusers multiplies by Python floats, which torch rounds to float32 first.
    ramp = np.arange(extent, dtype=np.float64) / extent
    shape = [1] * tile.ndim
    shape[axis] = extent
    fade_in = jnp.asarray(ramp.reshape(shape), tile.dtype)
    fade_out = jnp.asarray((1.0 - ramp).reshape(shape), tile.dtype)
    head = jax.lax.slice_in_dim(tile, 0, extent, axis=axis)
    tail = jax.lax.slice_in_dim(previous, previous.shape[axis] - extent, previous.shape[axis], axis=axis)
    rest = jax.lax.slice_in_dim(tile, extent, tile.shape[axis], axis=axis)
    return jnp.concatenate([tail * fade_out + head * fade_in, rest], axis=axis)


def tiled_map(fn: Callable[[jax.Array], jax.Array], x: jax.Array, rows: AxisTiles, cols: AxisTiles) -> jax.Array:
    """Applies `fn` ([B, T, h, w, C] -> [B, T', h', w', C']) tile by tile over x [B, T, H, W, C]."""
    height, width = x.shape[2:4]
    boxes = {
        (i, j): (top, min(top + rows.tile, height), left, min(left + cols.tile, width))
        for i, top in enumerate(rows.starts(height))
        for j, left in enumerate(cols.starts(width))
    }
    groups: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for key, (top, bottom, left, right) in boxes.items():
        groups.setdefault((bottom - top, right - left), []).append(key)
    outs: dict[tuple[int, int], jax.Array] = {}
    for members in groups.values():
        crops = [x[:, :, top:bottom, left:right] for top, bottom, left, right in map(boxes.get, members)]
        mapped = jax.lax.map(fn, jnp.stack(crops))  # [N, B, T', h', w', C']
        outs.update({key: mapped[k] for k, key in enumerate(members)})
    bands = []
    for i in range(len(rows.starts(height))):
        band = []
        for j in range(len(cols.starts(width))):
            tile = outs[i, j]
            if i > 0:
                tile = _blend(outs[i - 1, j], tile, rows.blend, axis=2)
            if j > 0:
                tile = _blend(outs[i, j - 1], tile, cols.blend, axis=3)
            outs[i, j] = tile
            band.append(tile[:, :, : rows.out_stride, : cols.out_stride])
        bands.append(jnp.concatenate(band, axis=3))
    return jnp.concatenate(bands, axis=2)[:, :, : rows.out_size, : cols.out_size]
