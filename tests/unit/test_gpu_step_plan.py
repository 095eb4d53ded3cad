"""The memory plan's GPU step terms against the device peaks the check recorded on an H200.

Each bench stage of the device check records its guided steps' device peak (`peak_memory_bytes`:
the allocator's peak before any VAE runs) beside the plan of its day. No GPU runs here: the test
plans each recorded run again with today's terms, so a change that would plan a GPU step below what
it held (a refused-too-late OOM) or more than 10% above it (a refusal of what fits) fails on CPU.
"""

import json
from pathlib import Path

import pytest

from wanjax.application.bench import BenchOptions, bench_workload, plan_bench
from wanjax.domain.memory import plan_memory

RECORDS = [
    Path(__file__).parents[2] / f"docs/benchmarks/device-check-nvidia-h200-2026-11-27{suffix}.json"
    for suffix in ("", "-rerun")
]
RUNS = {
    f"{path.stem[-5:]}:{name}": stage
    for path in RECORDS
    for name, stage in json.loads(path.read_text())["stages"].items()
    if stage.get("status") == "passed" and "planned_peak_memory_bytes" in stage
}


def _planned_step(record: dict) -> int:
    """The denoising phase's device total of the recorded run's plan, on a GPU."""
    shape = record["shape"]
    options = BenchOptions(
        model=record["model"], layers=record["layers"], steps=record["steps"], height=shape["height"],
        width=shape["width"], num_frames=shape["num_frames"], dtype=record["dtype"], attention=record["attention"],
        overrides={"weights_dtype": record["weights_dtype"], "offload": record["offload"]},
    )  # fmt: skip
    plan = plan_memory(bench_workload(plan_bench(options)), platform="gpu", available=None)
    return dict(plan.phases)["denoising"]


def test_the_records_cover_both_sizes_bf16_and_fp8_weights() -> None:
    kinds = {(r["model"], r["layers"], r["shape"]["num_frames"], r["weights_dtype"]) for r in RUNS.values()}
    assert {("wan2.1-t2v-1.3b", 30, 25, "bfloat16"), ("wan2.1-t2v-1.3b", 30, 81, "bfloat16"),
            ("wan2.1-t2v-1.3b", 1, 81, "bfloat16"), ("wan2.1-t2v-14b", 40, 81, "bfloat16"),
            ("wan2.1-t2v-14b", 40, 81, "float8_e4m3fn")} <= kinds  # fmt: skip


@pytest.mark.parametrize("name", sorted(RUNS))
def test_gpu_step_plan_is_at_most_10_percent_above_the_recorded_peak(name: str) -> None:
    record = RUNS[name]
    measured, planned = record["peak_memory_bytes"], _planned_step(record)
    assert measured <= planned <= 1.10 * measured, (planned / 2**30, measured / 2**30)
