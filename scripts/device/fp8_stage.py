"""The quantized-compute stages: `wanjax bench` with the blocks' matmuls in e4m3 (`matmul_dtype=float8_e4m3fn`)
or SageAttention-style attention (`attention=blockwise_sage`: int8 q k^T, fp8 p v) beside the default on the
same random weights and noise, each run in its own process writing its final latents (`--latents-out`),
compared by relative L2; at the demo's size in the smoke run."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
from commands import SMOKE_STEPS, WANJAX, run

FP8_MATMUL = ("matmul_dtype=float8_e4m3fn",)
SAGE = ("attention=blockwise_sage",)


def fp8_matmul_13b_480p_25(out: Path, smoke: bool) -> dict:
    """bench_13b_480p_25 with the blocks' matmuls in fp8 (`matmul_dtype=float8_e4m3fn`) beside bf16,
    same random weights and noise: each one's step time, and the fp8 run's final latents against
    bf16's (relative L2) after a 2-step run (one step's prediction) and after a 10-step run."""
    return _quantized_steps("fp8_matmul_13b_480p_25", "wan2.1-t2v-1.3b", (832, 480, 25), (1, 9),
                            {"fp8": FP8_MATMUL}, smoke=smoke, out=out)  # fmt: skip


def fp8_matmul_14b_720p_81(out: Path, smoke: bool) -> dict:
    """The same for the 14B at 1280x720x81, a 2-step run each."""
    return _quantized_steps("fp8_matmul_14b_720p_81", "wan2.1-t2v-14b", (1280, 720, 81), (1,),
                            {"fp8": FP8_MATMUL}, smoke=smoke, out=out)  # fmt: skip


def sage_13b_480p_25(out: Path, smoke: bool) -> dict:
    """bench_13b_480p_25 with `attention=blockwise_sage`, and with it and fp8 matmuls (the goal's "guided
    step with fp8"), beside the default (cuDNN's bf16 attention on a GPU): step times, and final latents
    against the default's after a 2-step and a 10-step run."""
    return _quantized_steps("sage_13b_480p_25", "wan2.1-t2v-1.3b", (832, 480, 25), (1, 9),
                            {"sage": SAGE, "fp8_sage": FP8_MATMUL + SAGE}, smoke=smoke, out=out)  # fmt: skip


def _quantized_steps(name: str, model: str, size: tuple[int, int, int], timed_steps: tuple[int, ...],
                     variants: dict[str, tuple[str, ...]], *, smoke: bool, out: Path) -> dict:
    """`wanjax bench` with the default settings and with each of `variants` (name: its --set
    settings) for each of `timed_steps` (the run has one step more), each in its own process writing
    its final latents; at demo size in the smoke run. Each variant's final latents against the default's
    (relative L2) by run length, and its step time's speedup over the default's in the longest run."""
    width, height, frames = size
    runs: dict[str, dict] = {}
    errors: dict[str, dict[str, float]] = {variant: {} for variant in variants}
    for steps in (SMOKE_STEPS,) if smoke else timed_steps:
        latents = {}
        for variant, sets in {"default": (), **variants}.items():
            tag = f"{steps + 1}_steps_{variant}"
            argv = [*WANJAX, "bench", "--model", "demo" if smoke else model, "--steps", str(steps),
                    "--json", str(out / f"{name}_{tag}.json"), "--latents-out", str(out / f"{name}_{tag}.npy")]
            argv += [arg for setting in sets for arg in ("--set", setting)]
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
            latents[variant] = np.load(out / f"{name}_{tag}.npy")
        for variant in variants:
            errors[variant][f"{steps + 1}_steps"] = _relative_l2(latents[variant], latents["default"])
    last = (SMOKE_STEPS if smoke else max(timed_steps)) + 1
    default = runs[f"{last}_steps_default"]["seconds_per_step"]
    speedups = {variant: default / runs[f"{last}_steps_{variant}"]["seconds_per_step"] for variant in variants}
    return {"settings": variants, "runs": runs, "final_latents_relative_l2_vs_default": errors,
            "speedup_vs_default": speedups}  # fmt: skip


def _relative_l2(value: np.ndarray, reference: np.ndarray) -> float:
    return float(np.linalg.norm(value.astype(np.float64) - reference) / np.linalg.norm(reference))
