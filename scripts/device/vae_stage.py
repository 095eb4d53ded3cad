"""The device check's VAE-at-real-sizes stage (issue 34): the published Wan VAEs' decode and encode
peaks beside the memory plan at the issue's full frame counts, each case
`tests/benchmarks/vae_real_peak.py` in a fresh process, its JSON written to OUT/vae_<case>.json as
it ends (a stage stopped at its budget keeps the cases that ended).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PEAK_SCRIPT = ROOT / "tests" / "benchmarks" / "vae_real_peak.py"

Case = tuple[str, ...]  # vae_real_peak.py's arguments: VAE MODE HEIGHT WIDTH FRAMES [KEY=VALUE ...]

# Untiled first; the tiled cases compile for 80 s each on an H200 host
DEVICE_CASES: tuple[Case, ...] = (
    ("2.1", "decode", "480", "832", "81"),
    ("2.1", "decode", "720", "1280", "81"),
    ("2.2", "decode", "704", "1280", "121"),
    ("2.1", "encode", "720", "1280", "81"),
    ("2.2", "encode", "704", "1280", "121"),
    ("2.1", "decode", "720", "1280", "81", "vae_tiling=true"),
    ("2.2", "decode", "704", "1280", "121", "vae_tiling=true"),
)
SMOKE_CASES: tuple[Case, ...] = (("2.1", "decode", "32", "32", "5"),)


def vae_real_sizes(out: Path, smoke: bool) -> dict:
    return {"cases": [_run(case, out) for case in (SMOKE_CASES if smoke else DEVICE_CASES)]}


def _run(case: Case, out: Path) -> dict:
    name = "vae_" + "_".join(a.replace("=", "-") for a in case)
    with (out / f"{name}.log").open("w") as log:
        done = subprocess.run([sys.executable, str(PEAK_SCRIPT), *case], stdout=subprocess.PIPE, stderr=log, text=True)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        result = {"case": " ".join(case), "status": "failed", "exit": done.returncode,
                  "log_tail": (out / f"{name}.log").read_text(errors="replace")[-1500:]}
    else:
        result = {"case": " ".join(case), "status": "passed", **json.loads(lines[-1])}
    (out / f"{name}.json").write_text(json.dumps(result) + "\n")
    return result
