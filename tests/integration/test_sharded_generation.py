"""Whole demo generations through the GenerationService on meshes of 8 virtual CPU devices
make the same video as on one device (the errors of meshes that do not fit: tests/unit/test_sharding_mesh.py).

In the 8-device process (tests/eight_devices.py; the device count is fixed at JAX start): one
service per mesh, built from the config keys alone (mesh_*, context_parallel), as the CLI would build it.
"""

from __future__ import annotations

import os
from unittest import mock

import numpy as np
import pytest

CFG_CACHE_MESH = {"mesh_data": 2, "mesh_context": 4}
"""One video with the CFG cache: its conditional-only steps run one row, which the data axis
cannot split, so those rows run whole on each data device (the context axis still splits them)."""

MESHES = {
    "2 data x 4 context, ulysses": {"mesh_data": 2, "mesh_context": 4},
    "2 fsdp x 4 tensor": {"mesh_fsdp": 2, "mesh_tensor": 4},
    "4 context x 2 tensor, ring": {"mesh_context": 4, "mesh_tensor": 2, "context_parallel": "ring"},
}
MAX_LEVEL_DIFFERENCE = 1
"""fp32 on CPU. A mesh reorders sums (all-reduces, online softmax) by ~1e-7 relative; over 3
steps and the VAE that can move a pixel across a rounding boundary of the uint8 quantisation,
one level at most. A layout error changes the noise-like demo video everywhere by tens of levels."""
MAX_FRACTION_DIFFERENT = 1e-3
"""Measured: 4e-5 to 6e-5 of the values (about ten of 221k) differ by that one level."""


# ---- in the 8-device process (tests/eight_devices.py) ---------------------------------------

SIZE = dict(height=64, width=96, num_frames=9, num_inference_steps=3)  # latents 3 x 8 x 12: 72 tokens


def _videos(overrides: dict) -> np.ndarray:
    from wanjax.application.container import build_container
    from wanjax.domain.config import GenerationConfig

    config = GenerationConfig.from_mapping(dict(model="demo", max_sequence_length=16, **SIZE)).with_overrides(overrides)
    service = build_container(config).service()
    requests = [config.request(f"a red fox {i}", seed=i, negative_prompt="blurry") for i in range(4)]
    return service.generate_batch(requests).array  # [4, F, H, W, 3] uint8: 8 transformer rows with CFG


def _cfg_cached(overrides: dict) -> tuple[np.ndarray, int]:
    from wanjax.application.container import build_container
    from wanjax.domain.config import GenerationConfig

    config = GenerationConfig.from_mapping(dict(model="demo", max_sequence_length=16, cache_policy="cfg_cache", **SIZE))
    config = config.with_overrides({"num_inference_steps": 4, **overrides})  # step 2 is conditional-only
    result = build_container(config).service().generate(config.request("a red fox", negative_prompt="blurry"))
    return result.array, int((~result.cache_report.unconditional_ran).sum())


DBCACHE = dict(cache_policy="dbcache", Fn_compute_blocks=1, max_warmup_steps=1, residual_diff_threshold=0.3,
               enable_taylorseer=True, taylorseer_order=2, num_inference_steps=6)  # fmt: skip
"""DBCache with TaylorSeer on the 2 data x 4 context mesh: each data device holds one guidance
pass's row, and each pass's change is a sum over tokens split 4 ways."""
FP8_SCAN = {"weights_dtype": "float8_e4m3fn", "scan_diffusion_loop": "true"}
"""DBCache again in the scan loop, its blocks' ranges sliced from fp8 kernels (fp32 activations)."""


def _dbcache(overrides: dict) -> tuple[np.ndarray, list]:
    from wanjax.application.container import build_container
    from wanjax.domain.config import GenerationConfig

    config = GenerationConfig.from_mapping(dict(model="demo", max_sequence_length=16, **SIZE))
    config = config.with_overrides({**DBCACHE, **overrides})
    result = build_container(config).service().generate(config.request("a red fox", negative_prompt="blurry"))
    return result.array, result.cache_report.pass_blocks_ran.tolist()


def measure(demo_cache_root: str) -> dict:
    """Each mesh's videos against one device's: how many uint8 levels apart, how many values."""
    with mock.patch.dict(os.environ, WANJAX_CACHE=demo_cache_root):  # the demo written once for the session
        reference = _videos({})
        results = {}
        for name, overrides in MESHES.items():
            frames = _videos(overrides)
            results[name] = {
                "shape": list(frames.shape),
                "max_level_difference": int(np.abs(frames.astype(np.int16) - reference).max()),
                "fraction_different": float((frames != reference).mean()),
            }
        reference, _ = _cfg_cached({})
        frames, conditional_only = _cfg_cached(CFG_CACHE_MESH)
        results["cfg_cache"] = {
            "conditional_only_steps": conditional_only,
            "max_level_difference": int(np.abs(frames.astype(np.int16) - reference).max()),
            "fraction_different": float((frames != reference).mean()),
        }
        for name, overrides in (("dbcache", {}), ("dbcache fp8 scan", FP8_SCAN)):
            reference, reference_passes = _dbcache(overrides)
            frames, passes = _dbcache({**CFG_CACHE_MESH, **overrides})
            results[name] = {
                "passes": passes,
                "reference_passes": reference_passes,
                "max_level_difference": int(np.abs(frames.astype(np.int16) - reference).max()),
                "fraction_different": float((frames != reference).mean()),
            }
        return results


# ---- the tests ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def results(eight_devices, demo_cache) -> dict:
    return eight_devices.call(__file__, "measure", str(demo_cache.parent))


@pytest.mark.parametrize("mesh", list(MESHES))
def test_generation_on_a_mesh_equals_one_device(results: dict, mesh: str) -> None:
    result = results[mesh]
    assert result["shape"] == [4, 9, 64, 96, 3]
    assert result["max_level_difference"] <= MAX_LEVEL_DIFFERENCE, result
    assert result["fraction_different"] <= MAX_FRACTION_DIFFERENT, result


def test_cfg_cache_conditional_only_steps_on_a_mesh_equal_one_device(results: dict) -> None:
    result = results["cfg_cache"]
    assert result["conditional_only_steps"] > 0, result
    assert result["max_level_difference"] <= MAX_LEVEL_DIFFERENCE, result
    assert result["fraction_different"] <= MAX_FRACTION_DIFFERENT, result


@pytest.mark.parametrize("name", ["dbcache", "dbcache fp8 scan"])
def test_dbcache_decides_each_pass_on_a_mesh_as_on_one_device(results: dict, name: str) -> None:
    result = results[name]
    assert result["passes"] == result["reference_passes"], result
    reused = ~np.asarray(result["passes"])
    assert reused.any() and not reused[1:].all(), "the run must reuse some steps and compute others"
    assert result["max_level_difference"] <= MAX_LEVEL_DIFFERENCE, result
    assert result["fraction_different"] <= MAX_FRACTION_DIFFERENT, result
