"""The device check within one device call: a stage whose budget no longer fits is not started,
and the check names the `--only` that runs what it left out in a call of its own."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

CHECK = Path(__file__).parents[2] / "scripts/device/check.py"


def test_stages_left_out_for_time_are_named_as_the_next_call(tmp_path: Path) -> None:
    argv = [sys.executable, CHECK, "--out", tmp_path, "--only", "goals,a14b", "--budget", "0"]  # no time: none starts
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)

    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "check.json").read_text())
    stages = report["stages"]
    assert len(stages) == 9 and all(stage["status"] == "skipped" for stage in stages.values())  # each stage once
    assert report["next_call"] == f"--only {','.join(stages)}"
    assert f"not run for time: {', '.join(stages)}; run them in a call of their own" in done.stdout
