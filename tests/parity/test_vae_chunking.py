"""Chunked (one `lax.scan` over time) and tiled VAE decode/encode, both Wan VAEs.

Scanned results are compared with our unrolled per-frame path (the diffusers
schedule) and with diffusers itself; tiled results with diffusers' `enable_tiling`.
Layouts: torch [B, C, F, H, W], ours [B, F, H, W, C].
"""

from __future__ import annotations


import attrs
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from flax import nnx

from vae_models import VaeModels, to_ours, to_torch_layout

from wanjax.adapters.jax.vae.model import WanVAE
from wanjax.adapters.jax.vae.runtime import VaeTiling
from wanjax.domain.specs import WAN22_LATENTS_MEAN, WAN22_LATENTS_STD

# Scan vs unrolled: the same ops on the same data, regrouped over time; XLA may fuse
# differently, so float32 results may differ in the last bits (measured: <= 2.4e-6).
SCAN_ATOL = 1e-5
# Against diffusers, as in test_vae_parity.py (measured: <= 4e-6 decode, 1e-6 relative encode).
REF_ATOL = 1e-4

WAN21 = dict(base_dim=8, z_dim=16, dim_mult=[1, 2, 2, 2], num_res_blocks=1, temperal_downsample=[False, True, True])
WAN22 = dict(
    base_dim=4, decoder_base_dim=8, z_dim=48, dim_mult=[1, 2, 4, 4], num_res_blocks=1,
    temperal_downsample=[False, True, True], is_residual=True, patch_size=2, in_channels=12,
    out_channels=12, scale_factor_spatial=16, latents_mean=list(WAN22_LATENTS_MEAN),
    latents_std=list(WAN22_LATENTS_STD),
)  # fmt: skip


def square_tiles(tile: int, stride: int) -> VaeTiling:
    return VaeTiling(
        tile_sample_min_height=tile, tile_sample_min_width=tile,
        tile_sample_stride_height=stride, tile_sample_stride_width=stride,
    )  # fmt: skip


# Small tiles, so that a 7 x 9 latent grid has interior, edge and corner tiles: 4 latents
# per tile, 3 between starts, keyed by spatial compression (pixels per latent).
TILES = {8: square_tiles(32, 24), 16: square_tiles(64, 48)}


class Models(VaeModels):
    """The VAE pair with seeded inputs of any size."""

    def latents(self, frames: int, height: int = 4, width: int = 6) -> torch.Tensor:
        return torch.randn(1, self.spec.z_dim, frames, height, width, generator=torch.Generator().manual_seed(frames))

    def video(self, frames: int, height: int, width: int) -> torch.Tensor:
        return torch.rand(1, 3, frames, height, width, generator=torch.Generator().manual_seed(frames)) * 2 - 1


@pytest.fixture(scope="module", params=["wan2.1", "wan2.2"])
def models(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Models:
    return Models(tmp_path_factory.mktemp(request.param), WAN21 if request.param == "wan2.1" else WAN22)


decode = nnx.jit(WanVAE.decode)
encode = nnx.jit(WanVAE.encode)


# one frame; a chunk longer than the video; chunks that divide the frames after the first; a padded last chunk
@pytest.mark.parametrize(("latent_frames", "chunk"), [(1, 1), (2, 3), (4, 1), (7, 4)])
def test_scanned_decode_equals_unrolled_and_diffusers(models: Models, latent_frames: int, chunk: int) -> None:
    z = models.latents(latent_frames)
    unrolled = np.asarray(decode(models.load(), to_ours(z)))
    scanned = np.asarray(decode(models.load(decode_chunk=chunk), to_ours(z)))
    assert scanned.shape == unrolled.shape and scanned.shape[1] == 1 + 4 * (latent_frames - 1)
    np.testing.assert_allclose(scanned, unrolled, rtol=0, atol=SCAN_ATOL)
    with torch.no_grad():
        expected = models.ref.decode(z).sample.numpy()
    np.testing.assert_allclose(to_torch_layout(scanned), expected, rtol=0, atol=REF_ATOL)


# the first frame alone; chunks that divide the frames after it; a padded last chunk
@pytest.mark.parametrize(("frames", "chunk"), [(1, 4), (9, 4), (13, 8)])
def test_scanned_encode_equals_unrolled_and_diffusers(models: Models, frames: int, chunk: int) -> None:
    space = models.spec.spatial_compression
    video = models.video(frames, 2 * space, 3 * space)
    unrolled = np.asarray(encode(models.load(), to_ours(video)))
    scanned = np.asarray(encode(models.load(encode_chunk=chunk), to_ours(video)))
    scale = np.abs(unrolled).max()
    np.testing.assert_allclose(scanned, unrolled, rtol=0, atol=SCAN_ATOL * scale)
    with torch.no_grad():
        expected = models.ref.encode(video).latent_dist.mode().numpy()
    np.testing.assert_allclose(to_torch_layout(scanned), expected, rtol=0, atol=REF_ATOL * np.abs(expected).max())


def test_scanned_program_size_does_not_grow_with_frames(models: Models) -> None:
    """One scan body serves every frame count; the unrolled program grows per latent frame."""

    def size(vae: WanVAE, frames: int) -> int:
        latents = jax.ShapeDtypeStruct((1, frames, 4, 6, models.spec.z_dim), jnp.float32)
        return len(jax.make_jaxpr(lambda z: vae.decode(z))(latents).eqns)

    scanned, unrolled = models.load(decode_chunk=2), models.load()
    assert size(scanned, 3) == size(scanned, 21)
    assert size(unrolled, 21) > size(unrolled, 3)


@pytest.mark.parametrize("chunk", [None, 2])
def test_tiled_decode_equals_diffusers_tiled_decode(models: Models, chunk: int | None) -> None:
    tiling = TILES[models.spec.spatial_compression]
    z = models.latents(2, 7, 9)
    tiled = np.asarray(decode(models.load(tiling=tiling, decode_chunk=chunk), to_ours(z)))
    models.ref.enable_tiling(**attrs.asdict(tiling))
    try:
        with torch.no_grad():
            expected = models.ref.decode(z).sample.numpy()
    finally:
        models.ref.disable_tiling()
    np.testing.assert_allclose(to_torch_layout(tiled), expected, rtol=0, atol=REF_ATOL)


def test_tiled_encode_equals_diffusers_tiled_encode(models: Models) -> None:
    tiling = TILES[models.spec.spatial_compression]
    # diffusers cuts encode tiles after patchify, so a 2.2 tile spans twice its pixels:
    # 7 x 9 encoder tiles' worth of positions either way.
    patched = tiling.tile_sample_min_height // 4
    video = models.video(5, 7 * patched * models.spec.patch, 9 * patched * models.spec.patch)
    tiled = np.asarray(encode(models.load(tiling=tiling, encode_chunk=4), to_ours(video)))
    models.ref.enable_tiling(**attrs.asdict(tiling))
    try:
        with torch.no_grad():
            expected = models.ref.encode(video).latent_dist.mode().numpy()
    finally:
        models.ref.disable_tiling()
    np.testing.assert_allclose(to_torch_layout(tiled), expected, rtol=0, atol=REF_ATOL * np.abs(expected).max())
