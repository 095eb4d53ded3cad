"""DBCache with TaylorSeer on weights as they are stored and placed, end to end on a tiny Wan 2.2
A14B (two experts, 2 blocks: the first decides, the second is the range a step may skip), in the
step-by-step and the scan loop: with `offload=components` (one expert on the device at a time; the
scan runs each expert's steps apart, the cache state carried across) the latents and every pass's
decisions are those of the resident weights, bit for bit; with fp8 storage the blocks' ranges are
sliced from the e4m3 kernels: a rule that never reuses is bitwise the dense fp8 run, and the two
loops decide alike."""

import functools

import numpy as np
import pytest

from wanjax.application.container import build_container
from wanjax.application.presets import resolve_config

DBCACHE = {"cache_policy": "dbcache", "Fn_compute_blocks": "1", "max_warmup_steps": "1", "residual_diff_threshold": "0.5",
           "max_continuous_cached_steps": "2", "enable_taylorseer": "true", "taylorseer_order": "2"}  # fmt: skip
FP8 = {"dtype": "bfloat16", "weights_dtype": "float8_e4m3fn"}
STEPS = 8


@functools.cache
def _run(checkpoint, settings: tuple[tuple[str, str], ...]) -> tuple[np.ndarray, np.ndarray]:
    """(final latents, per step and pass whether the middle blocks ran), made once per settings."""
    config = resolve_config(str(checkpoint), {"max_sequence_length": "8", **dict(settings)})
    request = config.request("a fox", negative_prompt="blurry", height=32, width=48, num_frames=5,
                             num_inference_steps=STEPS)  # fmt: skip
    result = build_container(config).service().generate(request, output_type="latent")
    return result.array, result.cache_report.pass_blocks_ran


def _settings(*parts: dict, scan: bool) -> tuple[tuple[str, str], ...]:
    merged = {key: value for part in parts for key, value in part.items()}
    return tuple(sorted({**merged, "scan_diffusion_loop": str(scan).lower()}.items()))


@pytest.mark.parametrize("scan", [False, True], ids=["python-loop", "scan-loop"])
def test_offload_components_runs_dbcache_to_the_resident_latents(tiny_a14b_checkpoint, scan):
    resident, resident_passes = _run(tiny_a14b_checkpoint, _settings(FP8, DBCACHE, scan=scan))
    moved, moved_passes = _run(tiny_a14b_checkpoint, _settings(FP8, DBCACHE, {"offload": "components"}, scan=scan))
    np.testing.assert_array_equal(moved_passes, resident_passes)
    np.testing.assert_array_equal(moved, resident)
    reused = ~resident_passes
    assert reused.any() and not reused[1:].all(), "the run must reuse some steps and compute others"


def test_fp8_dbcache_decides_alike_in_both_loops_and_its_ranges_are_the_dense_blocks(tiny_a14b_checkpoint):
    python_loop, python_passes = _run(tiny_a14b_checkpoint, _settings(FP8, DBCACHE, scan=False))
    scan_loop, scan_passes = _run(tiny_a14b_checkpoint, _settings(FP8, DBCACHE, scan=True))
    np.testing.assert_array_equal(scan_passes, python_passes)
    np.testing.assert_allclose(scan_loop, python_loop, rtol=0, atol=1e-5 * np.abs(python_loop).max())
    dense, _ = _run(tiny_a14b_checkpoint, _settings(FP8, scan=True))
    never, never_passes = _run(tiny_a14b_checkpoint, _settings(FP8, DBCACHE, {"residual_diff_threshold": "0"}, scan=True))
    assert never_passes.all()
    np.testing.assert_array_equal(never, dense)  # the first block, then the second: the blocks in two ranges
    assert not np.array_equal(scan_loop, dense)  # the reused steps changed the run
