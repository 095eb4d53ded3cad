"""The fp8-matmul stages: `wanjax bench` with the blocks' matmuls in e4m3 (`matmul_dtype=float8_e4m3fn`)
beside the default on the same random weights and noise, each run in its own process writing its
final latents (`--latents-out`), compared by relative L2; at the demo's size in the smoke run."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
from commands import SMOKE_STEPS, WANJAX, run


def fp8_matmul_13b_480p_25(out: Path, smoke: bool) -> dict:
    """bench_13b_480p_25 with the blocks' matmuls in fp8 (`matmul_dtype=float8_e4m3fn`) beside bf16,
    same random weights and noise: each one's step time, and the fp8 run's final latents against
    bf16's (relative L2) after a 2-step run (one step's prediction) and after a 10-step run."""
    return _fp8_matmul("fp8_matmul_13b_480p_25", "wan2.1-t2v-1.3b", (832, 480, 25), (1, 9), smoke=smoke, out=out)


def fp8_matmul_14b_720p_81(out: Path, smoke: bool) -> dict:
    """The same for the 14B at 1280x720x81, a 2-step run each."""
    return _fp8_matmul("fp8_matmul_14b_720p_81", "wan2.1-t2v-14b", (1280, 720, 81), (1,), smoke=smoke, out=out)


def _fp8_matmul(name: str, model: str, size: tuple[int, int, int], timed_steps: tuple[int, ...], *, smoke: bool,
                out: Path) -> dict:
    """`wanjax bench` in bf16 and with fp8 matmuls for each of `timed_steps` (the run has one step
    more), each in its own process writing its final latents; at demo size in the smoke run."""
    width, height, frames = size
    runs, errors = {}, {}
    for steps in (SMOKE_STEPS,) if smoke else timed_steps:
        latents = {}
        for matmul in ("auto", "float8_e4m3fn"):
            tag = f"{steps + 1}_steps_{'fp8' if matmul != 'auto' else 'default'}"
            argv = [*WANJAX, "bench", "--model", "demo" if smoke else model, "--steps", str(steps),
                    "--json", str(out / f"{name}_{tag}.json"), "--latents-out", str(out / f"{name}_{tag}.npy"),
                    "--set", f"matmul_dtype={matmul}"]
            if not smoke:
                argv += ["--width", str(width), "--height", str(height), "--num-frames", str(frames)]
            start = time.monotonic()
            run(argv)
            record = json.loads((out / f"{name}_{tag}.json").read_text())
            runs[tag] = {key: record[key] for key in ("seconds_per_step", "mfu", "peak_memory_bytes",
                                                      "planned_peak_memory_bytes", "compile_seconds")}
            runs[tag]["process_seconds"] = time.monotonic() - start
            # each run as it ends, into the stage's log: a stage stopped at its budget keeps them (log_tail)
            print(json.dumps({tag: runs[tag]}), file=sys.stderr, flush=True)
            latents[matmul] = np.load(out / f"{name}_{tag}.npy")
        errors[f"{steps + 1}_steps"] = _relative_l2(latents["float8_e4m3fn"], latents["auto"])
    last = max(timed_steps) + 1 if not smoke else SMOKE_STEPS + 1
    speedup = runs[f"{last}_steps_default"]["seconds_per_step"] / runs[f"{last}_steps_fp8"]["seconds_per_step"]
    return {"runs": runs, "final_latents_relative_l2_vs_default": errors, "fp8_speedup": speedup}


def _relative_l2(value: np.ndarray, reference: np.ndarray) -> float:
    return float(np.linalg.norm(value.astype(np.float64) - reference) / np.linalg.norm(reference))
