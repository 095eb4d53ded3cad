"""The GPU hosts' kit and prepared check, dry-run on this CPU, so neither rots between GPU runs.

`scripts/device-kit` downloads the pinned wheels; `scripts/device-check --smoke` builds a fresh
Python 3.12 venv from the device image's pins and the kit alone (`--no-index`) and runs every
stage at tiny sizes. The torch stages have no torch there (no CPU build on PyPI for Linux) and
say so; everything else must pass, with the same code and flags as on the GPU.

It takes about 3 minutes of one worker, and about 5 more for the end-to-end stages (six fresh
`wanjax generate` runs, each compiling its own), which the README's test command cannot spare within its
15: CI runs it (.ci/run sets WANJAX_DEVICE_SMOKE=1), and so does `WANJAX_DEVICE_SMOKE=1 ./scripts/test`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NEEDS_TORCH = {"diffusers_parity"}

pytestmark = pytest.mark.skipif(
    not os.environ.get("WANJAX_DEVICE_SMOKE"),
    reason="the device check's smoke run: CI runs it (WANJAX_DEVICE_SMOKE=1, set by .ci/run)",
)


def test_the_kit_and_the_smoke_run_of_the_device_check(tmp_path: Path) -> None:
    kit = subprocess.run([ROOT / "scripts/device-kit", tmp_path / "kit"], capture_output=True, text=True, timeout=900)
    assert kit.returncode == 0, kit.stderr[-3000:]
    assert "of 60 MiB" in kit.stdout

    out = tmp_path / "out"
    # The budget is the GPU's time; the smoke run on a loaded CI machine gets room for every stage.
    check = subprocess.run([ROOT / "scripts/device-check", "--smoke", "--kit", tmp_path / "kit", "--out", out,
                            "--budget", "1200"], capture_output=True, text=True, timeout=1500)  # fmt: skip
    report = json.loads((out / "check.json").read_text())
    stages = report["stages"]
    assert check.returncode == 0, f"{check.stdout[-3000:]}\n{check.stderr[-3000:]}"
    assert list(stages) == list(_stage_names())  # every stage ran, none was skipped for time
    for name, stage in stages.items():
        expected = "skipped" if name in NEEDS_TORCH else "passed"
        assert stage["status"] == expected, (name, stage)
    assert stages["environment"]["versions"]["jax"] == _pinned("jax")  # the image's version, not the project's
    assert stages["environment"]["memory_fraction"] == "0.92"  # not JAX's 75%, 59.7 GiB of an 80 GB H100
    assert stages["demo_vs_cpu"]["device_runs_bitwise_equal"]
    assert all(b.get("max_relative_error", 0) < 2e-2 for b in stages["attention_32760"]["backends"].values())
    assert stages["bench_14b_720p_81_fp8"]["weights_dtype"] == "float8_e4m3fn"
    profile = stages["profile_13b_480p_25"]
    assert 0 < profile["other_seconds_per_step"] < profile["device_seconds"]
    assert profile["around_matmuls"]["kernels"] and "by_name" not in profile
    fp8_errors = stages["fp8_matmul_13b_480p_25"]["final_latents_relative_l2_vs_default"]["fp8"].values()
    assert all(0 < error < 0.2 for error in fp8_errors)  # the fp8 matmuls ran, and stayed near
    for variant in ("sage", "fp8_sage"):  # int8/fp8 attention, alone and with fp8 matmuls
        errors = stages["sage_13b_480p_25"]["final_latents_relative_l2_vs_default"][variant].values()
        assert all(0 < error < 0.2 for error in errors)
    sage = stages["attention_sage_32760"]["backends"]  # cuDNN is unavailable on the CPU
    assert 0 < sage["blockwise_sage"]["relative_l2_error"] < 0.06 and sage["blockwise"]["relative_l2_error"] < 1e-2
    assert 0 < sage["pallas_sage"]["relative_l2_error"] < 0.06  # interpreted on the CPU, and run
    whole = stages["e2e_13b_480p_81"]  # a fresh `wanjax generate`, its phases from its --timings
    assert whole["steps"]["total"] == 2 and whole["frames_shape"] == [1, 17, 128, 192, 3]
    cached = stages["e2e_13b_480p_81_dbcache"]["steps"]  # DBCache with TaylorSeer: threshold 1 after 1 warm-up step
    assert (cached["total"], cached["skipped"]) == (4, 3)
    phases = whole["seconds_by_phase"]
    assert phases["process"] > phases["denoise"] > 0 and whole["memory"]["peak_bytes"] > 0
    experts = stages["e2e_a14b_720p_81"]  # 4 measured steps, the preset's 40 computed from them
    assert experts["measured"]["steps"]["total"] == 4 and sum(experts["computed"]["steps_per_expert"]) == 40


def _stage_names() -> list[str]:
    listed = subprocess.run([sys.executable, ROOT / "scripts/device/check.py", "--list"], capture_output=True, text=True)
    return listed.stdout.split()


def _pinned(name: str) -> str:
    for line in (ROOT / "scripts/device/image.txt").read_text().splitlines():
        if line.startswith(f"{name}=="):
            return line.split("==")[1]
    raise AssertionError(f"{name} is not pinned in scripts/device/image.txt")
