"""`wanjax generate --timings FILE`: the run's timing trace and what it ran with, as one JSON object
for scripts (the device check's end-to-end stages) instead of the printed TIMING SUMMARY."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from wanjax.domain.caching.report import CacheRunReport
from wanjax.domain.errors import OutputError
from wanjax.domain.memory import MemoryPlan
from wanjax.domain.tracing import TimingTrace


def check_report_path(path: Path) -> None:
    """Fails before any work where `path` cannot be written: its folder must exist."""
    if path.is_dir() or not path.absolute().parent.is_dir():
        raise OutputError(f"--timings {path}: give a file in an existing folder")


def run_report(
    trace: TimingTrace, step_ends: Sequence[float], cache: CacheRunReport, plan: MemoryPlan, *, device_peak: Any
) -> dict[str, Any]:
    """`seconds`: the trace's spans (load, conditioning: the prompts' encoding and the noise, compile,
    denoise, vae_decode, write, ...); `step_seconds`: from each denoising step's end (as the device
    finished it) to the next's; `steps`: how many ran their blocks and how many a step cache skipped;
    `memory`: the plan's peak and offload beside the device's measured peak (`device_peak`, a
    `MemoryPeak`: bytes and where they were read)."""
    return {
        "seconds": dict(trace.seconds),
        "step_seconds": [end - start for start, end in zip(step_ends, step_ends[1:])],
        "steps": {"total": cache.num_steps, "computed": cache.steps_computed, "skipped": cache.steps_skipped},
        "memory": {
            "offload": plan.offload,
            "planned_peak_bytes": plan.peak,
            "planned_peak_phase": plan.peak_phase,
            "available_bytes": plan.available,
            "peak_bytes": device_peak.bytes,
            "peak_source": device_peak.source,
        },
    }


def write_run_report(path: Path, report: dict[str, Any]) -> None:
    """Writes `report` to `path` under a temporary name, then renames it into place."""
    descriptor, temporary = tempfile.mkstemp(prefix=f".{path.name}.partial-", dir=path.absolute().parent)
    with os.fdopen(descriptor, "w") as file:
        json.dump(report, file, indent=2)
        file.write("\n")
    os.replace(temporary, path)
