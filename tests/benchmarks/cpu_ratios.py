"""The two CPU ratios of docs/performance.md, measured side by side in one run.

Usage: .venv/bin/python tests/benchmarks/cpu_ratios.py [--runs N]

1. The README demo as a whole process against diffusers' WanPipeline on the same demo
   folder (`demo_process.measure`: paired fresh processes, alternating order).
2. One guided fp32 denoising step of the Wan 2.1 1.3B architecture (4 of its 30 layers,
   256x256, 9 frames) against diffusers' WanTransformer3DModel on the same shapes:
   `wanjax bench ... --vs diffusers`, which times both in one process.

Prints each ratio (wanjax / diffusers; below 1 is faster) and the load average before and
after, so a reader can tell a quiet run from a shared one.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from demo_process import measure

DENOISE_STEP = [
    "bench", "--model", "wan2.1-t2v-1.3b", "--layers", "4", "--steps", "3", "--height", "256",
    "--width", "256", "--num-frames", "9", "--dtype", "float32", "--vs", "diffusers",
]  # fmt: skip


def denoise_step_ratio(out_dir: Path) -> dict[str, float]:
    record = out_dir / "bench.json"
    wanjax = Path(sys.executable).with_name("wanjax")
    subprocess.run([str(wanjax), *DENOISE_STEP, "--json", str(record)], check=True, stdout=subprocess.DEVNULL)
    result = json.loads(record.read_text())
    ratio = result["seconds_per_step"] / result["diffusers_seconds_per_step"]
    print(f"denoise step: wanjax {result['seconds_per_step']:.2f} s, diffusers "
          f"{result['diffusers_seconds_per_step']:.2f} s, wanjax/diffusers {ratio:.2f}", flush=True)  # fmt: skip
    return {"step_wanjax_s": result["seconds_per_step"], "step_diffusers_s": result["diffusers_seconds_per_step"],
            "step wanjax/diffusers": ratio}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=4, help="demo rounds (default 4)")
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()}", flush=True)
    with tempfile.TemporaryDirectory() as folder:
        summary = measure(args.runs, Path(folder))
        summary.update(denoise_step_ratio(Path(folder)))
    print(f"load average after: {os.getloadavg()}")
    print(", ".join(f"{key} {value:.2f}" for key, value in summary.items()))


if __name__ == "__main__":
    main()
