"""`wanjax bench` at the 1.3B model's real 480p size, two of its 30 layers: step time, MFU and
the peak memory whose goals are under 6 GiB at 41 frames and under 8 GiB at 81.

Skipped by default (`--benchmark-skip` in pyproject); run with
    .venv/bin/pytest tests/benchmarks/test_bench_cli.py --benchmark-only -s
The same as `wanjax bench --model wan2.1-t2v-1.3b --layers 2 --steps 1 --height 480 --width 832
--num-frames 41` (and 81). The memory goals are checked where memory is the device's (GPU, TPU):
on CPU the peak is the process's RSS, printed only.
"""

from __future__ import annotations

import pytest

from wanjax.application.bench import BenchOptions, run_bench
from wanjax.entrypoints.cli import bench_report

GOAL_BYTES = {41: 6 * 2**30, 81: 8 * 2**30}


@pytest.mark.parametrize("num_frames", [41, 81])
def test_wan21_1_3b_two_layers_480p(benchmark, num_frames):
    options = BenchOptions(model="wan2.1-t2v-1.3b", layers=2, steps=1, height=480, width=832, num_frames=num_frames)
    result = benchmark.pedantic(run_bench, args=(options,), rounds=1, warmup_rounds=0)
    benchmark.extra_info.update(result.as_json())
    print("\n" + bench_report(result))
    if result.memory.source.startswith("device"):
        assert result.memory.bytes < GOAL_BYTES[num_frames]
