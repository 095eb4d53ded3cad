"""VAE decode split spatially over 8 virtual CPU devices equals the single-device decode.

Both Wan VAEs (2.1 and 2.2, tiny random weights), several meshes, chunked and unrolled
over time, tiled; the compiled program exchanges conv halos (collective-permute) and
gathers no full-resolution activation. The 8-device process (tests/eight_devices.py; the
device count is fixed when JAX starts) runs every case and reports numbers; the tests judge them.
"""

from __future__ import annotations

import math
import re
import tempfile
from pathlib import Path

import numpy as np
import pytest

# Every output sees the same inputs, but per-device shapes change how XLA tiles, fuses and
# sums (convolutions, the middle block's attention over gathered keys): float32 frames in
# [0, 1] differ by rounding (measured <= 1.1e-6), and the few uint8 values sitting on a .5
# boundary flip by one level (measured: 1 to 21 of 10^4 to 10^6 values per case).
UNIT_ATOL = 1e-5
UINT8_LEVELS = 1

MESHES = {  # (data, fsdp, tensor, context)
    "8 context": (1, 1, 1, 8),
    "2 data x 4 context": (2, 1, 1, 4),
    "2 fsdp x 4 tensor": (1, 2, 4, 1),
}

# ---- in the 8-device process (tests/eight_devices.py) ---------------------------------------

AXES = ("data", "fsdp", "tensor", "context")


def _mesh_of(shape):
    import jax
    from jax.sharding import Mesh

    return Mesh(np.array(jax.devices()).reshape(shape), AXES)


def _collectives(hlo):
    found = re.findall(r"= (\w+)\[([\d,]*)\]\S* (all-gather|collective-permute|all-to-all|all-reduce)\(", hlo)
    return [(kind, dtype, [int(d) for d in dims.split(",") if d]) for dtype, dims, kind in found]


def _unit_frames(vae, latents, spatial=None):
    import jax

    constrain = None if spatial is None else spatial.constrainer(latents.shape)
    fn = jax.jit(lambda z: vae.decode_to_unit(z if constrain is None else constrain(z), constrain))
    return np.asarray(fn(latents))


def _tiles(spec):
    from wanjax.adapters.jax.vae.runtime import VaeTiling

    latent = spec.spatial_compression  # pixels per latent: tiles of 4 latents, 3 between starts
    return VaeTiling(
        tile_sample_min_height=4 * latent, tile_sample_min_width=4 * latent,
        tile_sample_stride_height=3 * latent, tile_sample_stride_width=3 * latent,
    )  # fmt: skip


# (vae, case, latents [B, F', H', W'], runtime, meshes, the mesh whose float32 frames are compared too)
CASES = [
    # any mesh splits the VAE's rows over all its devices: two meshes of 8 (rows over one axis,
    # rows over two) stand for the rest; the third is wan2.2's
    ("wan2.1", "chunked", (2, 3, 8, 6), dict(decode_chunk=1), ["8 context", "2 data x 4 context"], "2 data x 4 context"),
    ("wan2.1", "height and width", (1, 2, 6, 12), dict(decode_chunk=2), ["2 data x 4 context"], None),
    ("wan2.1", "tiled", (1, 2, 8, 8), dict(decode_chunk=1, tiling="grid"), ["8 context"], None),
    ("wan2.2", "chunked", (2, 3, 8, 6), dict(decode_chunk=1), ["2 fsdp x 4 tensor"], "2 fsdp x 4 tensor"),
    ("wan2.2", "width", (1, 2, 6, 8), dict(), ["8 context"], None),
]


def measure() -> list[dict]:
    """Every case's single-device and sharded decodes, compared; the compiled collectives."""
    from tiny_wan import TINY_VAE, TINY_VAE22
    from vae_models import VaeModels

    from wanjax.adapters.jax.vae.autoencoder import JaxVideoAutoencoder
    from wanjax.adapters.jax.vae.sharding import SpatialSharding
    from wanjax.domain.errors import ConfigError

    results = []
    models = {}
    rng = np.random.default_rng(0)
    for name, case, shape, runtime, mesh_names, unit_mesh in CASES:
        if name not in models:
            models[name] = VaeModels(Path(tempfile.mkdtemp()), TINY_VAE if name == "wan2.1" else TINY_VAE22)
        pair = models[name]
        if runtime.get("tiling") == "grid":
            runtime = dict(runtime, tiling=_tiles(pair.spec))
        latents = rng.standard_normal((*shape, pair.spec.z_dim)).astype(np.float32)
        single_u8 = JaxVideoAutoencoder(pair.load(**runtime)).decode_to_uint8(latents)
        single_unit = _unit_frames(pair.load(**runtime), latents) if unit_mesh else None
        for mesh_name in mesh_names:
            spatial = SpatialSharding(_mesh_of(MESHES[mesh_name]))
            sharded = JaxVideoAutoencoder(pair.load(**runtime), spatial)
            u8 = sharded.decode_to_uint8(latents)
            unit_diff = None
            if mesh_name == unit_mesh:
                unit_diff = float(np.abs(_unit_frames(pair.load(**runtime), latents, spatial) - single_unit).max())
            hlo = sharded.prepare(latents).as_text()
            results.append(dict(
                vae=name, case=case, mesh=mesh_name, latents=list(latents.shape), frames=list(u8.shape),
                layout=list(spatial.layout(*shape[2:4])), unit_diff=unit_diff,
                u8_diff=int(np.abs(u8.astype(int) - single_u8.astype(int)).max()),
                u8_changed=int((u8 != single_u8).sum()),
                collectives=_collectives(hlo),
            ))  # fmt: skip
    for name, pair in models.items():
        spatial = SpatialSharding(_mesh_of(MESHES["8 context"]))
        try:
            indivisible = np.zeros((1, 2, 7, 9, pair.spec.z_dim), np.float32)
            JaxVideoAutoencoder(pair.load(decode_chunk=1), spatial).decode_to_uint8(indivisible)
            results.append(dict(vae=name, case="indivisible", error=None))
        except ConfigError as err:
            results.append(dict(vae=name, case="indivisible", error=str(err)))
    return results


# ---- the tests ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def results(eight_devices) -> list[dict]:
    results = eight_devices.call(__file__, "measure")
    print(results)  # shown by pytest -s or on failure: the measured differences
    return results


def _decodes(results: list[dict], *, tiled: bool = False) -> list[dict]:
    return [r for r in results if r["case"] != "indivisible" and (r["case"] == "tiled") == tiled]


def test_every_case_ran(results):
    ran = {(r["vae"], r["case"], r["mesh"]) for r in results if r["case"] != "indivisible"}
    assert len(ran) == 6, sorted(ran)


def test_sharded_decode_equals_single_device_decode(results):
    compared_unit = 0
    for r in _decodes(results):
        assert r["u8_diff"] <= UINT8_LEVELS, r
        if r["unit_diff"] is not None:
            assert r["unit_diff"] <= UNIT_ATOL, r
            compared_unit += 1
    assert compared_unit == 2


def test_layout_splits_rows_and_falls_back_to_columns(results):
    layouts = {(r["vae"], r["case"], r["mesh"]): r["layout"] for r in _decodes(results)}
    assert layouts["wan2.1", "chunked", "8 context"] == [None, None, "context", None, None]
    assert layouts["wan2.2", "chunked", "2 fsdp x 4 tensor"] == [None, None, ["fsdp", "tensor"], None, None]
    # 6 latent rows over 2 x 4 devices: rows over data, columns over context
    assert layouts["wan2.1", "height and width", "2 data x 4 context"] == [None, None, "data", "context", None]
    assert layouts["wan2.2", "width", "8 context"] == [None, None, None, "context", None]


def test_halos_are_exchanged_and_no_full_resolution_activation_is_gathered(results):
    for r in _decodes(results):
        kinds = [kind for kind, _, _ in r["collectives"]]
        assert "collective-permute" in kinds, r["case"]  # the conv halos at the seams
        assert "all-to-all" not in kinds, r["collectives"]
        reductions = [(dtype, dims) for kind, dtype, dims in r["collectives"] if kind == "all-reduce"]
        assert all(r == ("pred", []) for r in reductions), r["collectives"]  # only the one-value finiteness flag
        gathers = [(dtype, dims) for kind, dtype, dims in r["collectives"] if kind == "all-gather"]
        assert ("u8", r["frames"]) in gathers  # the output frames, replicated for every process to read
        pixels = math.prod(r["frames"][:4])  # B * F * H * W
        for dtype, dims in gathers:
            # Float gathers are the middle block's attention inputs at latent resolution (a few
            # hundred to thousand values here). A full- or half-resolution activation, even one
            # chunk of it, holds at least an eighth of the output's pixel count.
            assert dtype == "u8" or 8 * math.prod(dims) < pixels, (r["case"], r["mesh"], dtype, dims)


def test_tiled_decode_on_a_mesh_runs_replicated_and_equals_one_device(results):
    (tiled,) = _decodes(results, tiled=True)
    assert tiled["u8_changed"] == 0  # the same program on every device: bitwise equal
    assert not tiled["collectives"], tiled["collectives"]


def test_indivisible_latent_grid_is_a_config_error_naming_the_mesh(results):
    errors = [r["error"] for r in results if r["case"] == "indivisible"]
    assert len(errors) == 2
    for error in errors:
        assert error is not None and "7 x 9" in error and "context=8" in error and "multiple of 8" in error


@pytest.mark.parametrize(
    ("mesh", "latent_grid", "layout"),
    [
        ((1, 2, 4, 1), (90, 160), (None, None, "fsdp", "tensor", None)),  # Wan 2.1 at 720 x 1280
        ((1, 1, 1, 8), (90, 160), (None, None, None, "context", None)),
        ((2, 1, 1, 4), (45, 80), (None, None, None, ("data", "context"), None)),  # Wan 2.2 at 720 x 1280
        ((1, 1, 2, 4), (104, 60), (None, None, ("tensor", "context"), None, None)),  # 832 x 480 portrait
    ],
)
def test_real_latent_grids_find_a_layout(mesh, latent_grid, layout):
    from jax.sharding import AbstractMesh, PartitionSpec

    from wanjax.adapters.jax.vae.sharding import SpatialSharding

    spatial = SpatialSharding(AbstractMesh(mesh, ("data", "fsdp", "tensor", "context")))
    assert spatial.layout(*latent_grid) == PartitionSpec(*layout)
