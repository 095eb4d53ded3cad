"""Cache policies from the CLI and the service, end to end on the demo model.

The device tests (tests/integration/test_cache_policies.py) drive the denoiser with hand-made
plans; these check that a config key reaches it: the service plans the request's policy, the
denoiser skips what the plan says, and a calibration run writes a curve a later run can use.
"""

import json

import numpy as np
import pytest
import yaml

from wanjax.application.container import build_container
from wanjax.application.presets import resolve_config
from wanjax.domain.caching.settings import POLICIES, policy_keys
from wanjax.domain.plan import plan_sampling
from wanjax.entrypoints.cli import main

SMALL = dict(height=32, width=48, num_frames=5, num_inference_steps=12)
CLI_SMALL = ["--height", "32", "--width", "48", "--num-frames", "5", "--steps", "12"]


@pytest.fixture(autouse=True)
def demo_in_session_cache(demo_cache, monkeypatch):
    monkeypatch.setenv("WANJAX_CACHE", str(demo_cache.parent))


def _generate(overrides: dict[str, str]):
    config = resolve_config("demo", {"dtype": "float32", **overrides})
    request = config.request("a fox", negative_prompt="blurry", **SMALL)
    result = build_container(config).service().generate(request, output_type="latent")
    return request, result


def test_the_service_runs_the_policy_the_config_names():
    request, result = _generate({"cache_policy": "magcache", "magcache_thresh": "0.3", "magcache_K": "3"})
    planned = plan_sampling(request).cache.features["magcache"].reuse_residual
    assert planned.any()  # the demo borrows the 1.3B curve: this threshold reuses some steps
    np.testing.assert_array_equal(result.cache_report.blocks_ran, ~planned)
    assert result.cache_report.steps_skipped == planned.sum()
    _, dense = _generate({})
    assert dense.cache_report.steps_skipped == 0
    assert not np.array_equal(result.array, dense.array)  # reused steps change the trajectory


@pytest.mark.parametrize(
    "overrides",
    [
        {"cache_policy": "magcache", "magcache_thresh": "0"},
        {"cache_policy": "teacache", "teacache_thresh": "0"},
        {"cache_policy": "sencache", "sencache_thresh": "0"},
        {"cache_policy": "magcache", "magcache_thresh": "0", "scan_diffusion_loop": "true"},
    ],
    ids=["magcache", "teacache", "sencache", "magcache-scan-loop"],
)
def test_threshold_zero_is_exactly_the_dense_run(overrides, dense_latents):
    _, result = _generate(overrides)
    assert result.cache_report.steps_skipped == 0
    np.testing.assert_array_equal(result.array, dense_latents)


@pytest.fixture(scope="module")
def dense_latents(demo_cache):
    with pytest.MonkeyPatch.context() as patch:  # module scope: the autouse fixture is per test
        patch.setenv("WANJAX_CACHE", str(demo_cache.parent))
        return _generate({})[1].array


def test_calibration_writes_a_curve_that_a_later_run_uses(tmp_path, capsys):
    out = tmp_path / "fox.npy"
    args = ["generate", "--prompt", "a fox", *CLI_SMALL, "--set", "dtype=float32", "--out", str(out)]
    assert main([*args, "--set", "magcache_calibration=true"]) == 0
    curve_file = tmp_path / "fox.magcache.yaml"
    assert f"wrote {curve_file}" in capsys.readouterr().out
    curve = yaml.safe_load(curve_file.read_text())
    ratios = np.asarray(curve["mag_ratios"])
    assert ratios.shape == (2 * SMALL["num_inference_steps"],)  # cond and uncond per step
    assert np.all(ratios[:2] == 1.0) and np.all(ratios > 0) and not np.all(ratios == 1.0)

    cached = tmp_path / "cached.npy"
    given = ["--set", "cache_policy=magcache", "--set", f"mag_ratios={','.join(map(str, ratios))}"]
    timings = tmp_path / "timings.json"
    assert main([*args[:-1], str(cached), *given, "--set", "magcache_thresh=0.5", "--timings", str(timings)]) == 0
    printed = capsys.readouterr().out
    skipped = int(printed.split("cache_policy=magcache: ")[1].split(" of ")[0])
    assert 0 < skipped < SMALL["num_inference_steps"]  # the measured curve drives the skips
    steps = json.loads(timings.read_text())["steps"]  # --timings: the same counts, for scripts
    assert steps == {"total": SMALL["num_inference_steps"], "computed": steps["total"] - skipped, "skipped": skipped}
    names = ["cached.npy", "fox.magcache.yaml", "fox.npy", "timings.json"]
    assert sorted(p.name for p in tmp_path.iterdir()) == names


def test_dbcache_is_configured_with_cache_dits_keys_from_the_cli(tmp_path, capsys):
    out = tmp_path / "fox.npy"
    args = ["generate", "--prompt", "a fox", *CLI_SMALL, "--set", "dtype=float32", "--out", str(out)]
    dbcache = ["--set", "cache_policy=dbcache", "--set", "Fn_compute_blocks=1", "--set", "max_warmup_steps=4",
               "--set", "residual_diff_threshold=1", "--set", "max_continuous_cached_steps=2",
               "--set", "enable_taylorseer=true", "--set", "taylorseer_order=2"]  # fmt: skip
    assert main([*args, *dbcache]) == 0
    # threshold 1 reuses whenever it may: after 4 warm-up steps, 2 in a row, then one computes
    assert "cache_policy=dbcache: 6 of 12 steps skipped" in capsys.readouterr().out
    assert main([*args, *dbcache, "--set", "Fn_compute_blocks=3"]) == 2  # the demo has 2 blocks
    assert "Fn_compute_blocks=3: this transformer has 2 blocks" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["generate", "plan", "bench", "serve"])
def test_the_help_names_every_policy_with_its_keys(command, capsys):
    with pytest.raises(SystemExit) as done:
        main([command, "--help"])
    assert done.value.code == 0
    text = " ".join(capsys.readouterr().out.split())  # its lines joined, as wrapped
    for policy in POLICIES[1:]:
        assert f"{policy} {', '.join(policy_keys(policy))}" in text
    assert "--set cache_policy=dbcache --set Fn_compute_blocks=4 --set enable_taylorseer=true" in text
    assert "magcache_calibration=true" in text
