"""The device check's profile summary (scripts/device/kernel_profile.py): kernel time by kind from
a Perfetto trace, the time per step outside matmuls and attention, and what each of those kernels
reads and writes according to the step's optimized HLO. The GPU run is the only real input; here a
hand-made trace in the profiler's layout and a module XLA:CPU compiled stand in for it."""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest

sys.path.insert(0, str(Path(__file__).parents[2] / "scripts/device"))
from kernel_profile import around_matmuls, fusion_signatures, kernel_time  # noqa: E402

GPU_STREAM, XLA_OPS = 7, 8
KERNELS = {  # microseconds over 3 traced steps
    "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7": 600.0,
    "nvjet_sm90_tst_128x224_64x4_2x1_v_bz_coopA_NNT": 300.0,
    "loop_convert_fusion_2": 60.0,
    "input_concatenate_fusion": 30.0,
    "MemcpyD2D": 9.0,
}
# The GPU-optimized HLO prints operands with their arrays; a multi-output fusion returns a tuple.
GPU_HLO = """\
HloModule jit_step, entry_computation_layout={(bf16[2,8,16]{2,1,0})->bf16[2,8,16]{2,1,0}}

%fused_computation.2 (param_0: bf16[2,8,64], param_1: bf16[64]) -> bf16[2,8,64] {
  %param_0 = bf16[2,8,64]{2,1,0} parameter(0)
  ROOT %convert.1 = bf16[2,8,64]{2,1,0} convert(bf16[2,8,64]{2,1,0} %param_0)
}

ENTRY %main (p: bf16[2,8,64], b: bf16[64]) -> (bf16[2,8,64], f32[2,8]) {
  %p = bf16[2,8,64]{2,1,0} parameter(0)
  %b = bf16[64]{0} parameter(1)
  %loop_convert_fusion.2 = bf16[2,8,64]{2,1,0} fusion(bf16[2,8,64]{2,1,0} %p, bf16[64]{0} %b), kind=kLoop, calls=%fused_computation.2
  ROOT %input_concatenate_fusion = (bf16[2,8,64]{2,1,0}, f32[2,8]{1,0}) fusion(%loop_convert_fusion.2), kind=kInput, calls=%fused_computation.2
}
"""


@pytest.fixture
def trace_dir(tmp_path: Path) -> Path:
    events = [
        {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "/host:CPU"}},
        {"ph": "M", "name": "process_name", "pid": 2, "args": {"name": "/device:GPU:0"}},
        {"ph": "M", "name": "thread_name", "pid": 2, "tid": GPU_STREAM, "args": {"name": "Stream #14(Compute)"}},
        {"ph": "M", "name": "thread_name", "pid": 2, "tid": XLA_OPS, "args": {"name": "XLA Ops"}},
        {"ph": "X", "name": "PjitFunction(step)", "pid": 1, "tid": 1, "ts": 0, "dur": 5000.0},
    ]
    for name, micros in KERNELS.items():
        events.append({"ph": "X", "name": name, "pid": 2, "tid": GPU_STREAM, "ts": 0, "dur": micros})
        # the "XLA Ops" line repeats each kernel's time: not counted twice
        events.append({"ph": "X", "name": name, "pid": 2, "tid": XLA_OPS, "ts": 0, "dur": micros})
    folder = tmp_path / "plugins/profile/run"
    folder.mkdir(parents=True)
    (folder / "perfetto_trace.json.gz").write_bytes(gzip.compress(json.dumps({"traceEvents": events}).encode()))
    return tmp_path


def test_kernels_are_counted_once_on_the_device_streams_by_kind(trace_dir: Path) -> None:
    kernels = kernel_time(trace_dir)
    assert kernels["device_seconds"] == pytest.approx(sum(KERNELS.values()) / 1e6)
    shares = kernels["share_by_kind"]
    assert shares["attention"] == pytest.approx(600 / 999, abs=1e-4)
    assert shares["matmul"] == pytest.approx(300 / 999, abs=1e-4)
    assert shares["other"] == pytest.approx(90 / 999, abs=1e-4)
    assert shares["copy"] == pytest.approx(9 / 999, abs=1e-4)


def test_time_outside_matmuls_and_attention_per_step_with_each_kernels_arrays(trace_dir: Path, tmp_path: Path) -> None:
    hlo_dir = tmp_path / "hlo"
    hlo_dir.mkdir()
    (hlo_dir / "module_0001.jit_small.sm_9.0_gpu_after_optimizations.txt").write_text("HloModule small\n")
    (hlo_dir / "module_0002.jit_step.sm_9.0_gpu_after_optimizations.txt").write_text(GPU_HLO)
    around = around_matmuls(kernel_time(trace_dir)["by_name"], steps=3, hlo_dir=hlo_dir)
    assert around["seconds_per_step"] == pytest.approx(99e-6 / 3)
    assert around["fusions_seconds_per_step"] == pytest.approx(90e-6 / 3)
    assert around["copies_seconds_per_step"] == pytest.approx(9e-6 / 3)
    assert [k["name"] for k in around["kernels"]] == ["loop_convert_fusion_2", "input_concatenate_fusion", "MemcpyD2D"]
    gelu, concatenate, copy = around["kernels"]
    assert gelu["hlo"] == {"output": ["bf16[2,8,64]"], "operands": ["bf16[2,8,64]", "bf16[64]"],
                           "bytes_written": 2048, "bytes_read": 2048 + 128}  # fmt: skip
    assert concatenate["hlo"]["output"] == ["bf16[2,8,64]", "f32[2,8]"]
    assert concatenate["hlo"]["operands"] == ["bf16[2,8,64]"]  # named, resolved through its instruction
    assert "hlo" not in copy  # a copy is no fusion


def test_signatures_of_a_module_xla_compiled_here() -> None:
    def gelu_of_projection(x: jax.Array, w: jax.Array, b: jax.Array) -> jax.Array:
        return jax.nn.gelu((x @ w + b).astype(jnp.float32)).astype(x.dtype)

    arrays = (jnp.ones((24, 16), jnp.bfloat16), jnp.ones((16, 40), jnp.bfloat16), jnp.ones((40,), jnp.bfloat16))
    text = jax.jit(gelu_of_projection).lower(*arrays).compile().as_text()
    signatures = fusion_signatures(text)
    # the fusion that ends the function writes the [24, 40] bf16 result and reads the 40-wide bias
    (last,) = [s for s in signatures.values() if s["output"] == ["bf16[24,40]"]]
    assert "bf16[40]" in last["operands"] and last["bytes_written"] == 24 * 40 * 2
    assert all(s["bytes_read"] > 0 for s in signatures.values())
