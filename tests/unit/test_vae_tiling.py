"""The tile grid, crop and blend: a map that acts position by position is unchanged by tiling.

The VAE itself is not such a map (its convolutions see across tile borders and its
middle attention sees the whole frame), so tiled VAE output differs from untiled; the
parity tests compare it with diffusers' tiled output instead.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from wanjax.adapters.jax.vae.runtime import VaeTiling
from wanjax.adapters.jax.vae.tiling import decode_tiles, encode_tiles, tiled_map
from wanjax.domain.specs import VaeSpec

TILING = VaeTiling(
    tile_sample_min_height=32, tile_sample_min_width=32, tile_sample_stride_height=24, tile_sample_stride_width=24
)


def upsample8(x: jax.Array) -> jax.Array:
    """[B, T, h, w, C] -> [B, T, 8h, 8w, C]: every latent becomes an 8 x 8 block (decoder-like)."""
    return jnp.repeat(jnp.repeat(jnp.tanh(x), 8, axis=2), 8, axis=3)


def pool8(x: jax.Array) -> jax.Array:
    """[B, T, H, W, C] -> [B, T, H/8, W/8, C]: 8 x 8 block means (encoder-like)."""
    b, t, h, w, c = x.shape
    return x.reshape(b, t, h // 8, 8, w // 8, 8, c).mean(axis=(3, 5))


@pytest.mark.parametrize(("height", "width"), [(7, 9), (4, 13), (5, 4)])
def test_decode_grid_of_a_blockwise_map_is_the_untiled_map(height: int, width: int) -> None:
    x = jax.random.normal(jax.random.key(0), (1, 2, height, width, 3))
    grid = decode_tiles(TILING, VaeSpec(), height, width)
    assert grid is not None
    np.testing.assert_allclose(np.asarray(tiled_map(upsample8, x, *grid)), np.asarray(upsample8(x)), atol=1e-6)


def test_encode_grid_of_a_blockwise_map_is_the_untiled_map() -> None:
    x = jax.random.normal(jax.random.key(1), (1, 5, 56, 72, 3))
    grid = encode_tiles(TILING, VaeSpec(), 56, 72)
    assert grid is not None
    np.testing.assert_allclose(np.asarray(tiled_map(pool8, x, *grid)), np.asarray(pool8(x)), atol=1e-6)


def test_wan22_decode_grid_blends_in_patchified_pixels() -> None:
    """2.2: 16 pixels per latent, blended before unpatchify, so in 8-per-latent positions."""
    tiling = VaeTiling(
        tile_sample_min_height=64, tile_sample_min_width=64, tile_sample_stride_height=48, tile_sample_stride_width=48
    )
    rows, cols = decode_tiles(tiling, VaeSpec.wan22(), 7, 9)
    assert (rows.tile, rows.stride, rows.blend, rows.out_stride, rows.out_size) == (4, 3, 8, 24, 56)
    assert cols.out_size == 72


def test_inputs_within_one_tile_are_not_tiled() -> None:
    assert decode_tiles(TILING, VaeSpec(), 4, 4) is None
    assert encode_tiles(TILING, VaeSpec(), 32, 32) is None
