"""`wanjax bench` end to end on the CPU: random weights, no checkpoint, small shapes."""

from __future__ import annotations

import json

import attrs
import numpy as np
import pytest

from wanjax.adapters.demo.checkpoint import DEMO_TRANSFORMER
from wanjax.application.builders import default_platform
from wanjax.domain.architectures import WAN21_T2V_1_3B
from wanjax.domain.config import GenerationConfig
from wanjax.domain.flops import transformer_flops_per_step
from wanjax.domain.memory import transformer_parameters
from wanjax.entrypoints.cli import main

KEYS = {
    "device", "model", "shape", "dtype", "attention", "seconds_per_step", "flops_per_step", "mfu",
    "peak_memory_bytes", "compile_seconds",
}  # fmt: skip
TINY = ["--height", "32", "--width", "32", "--num-frames", "5"]


def _bench(tmp_path, *args: str) -> dict:
    out = tmp_path / "out.json"
    assert main(["bench", *args, "--json", str(out)]) == 0
    assert [p.name for p in tmp_path.iterdir() if p.is_file()] == ["out.json"]  # written whole: no temporary left
    return json.loads(out.read_text())


def _check_consistent(record: dict, spec, latents: list[int], text_tokens: int) -> None:
    assert KEYS <= set(record)
    for key in ("seconds_per_step", "flops_per_step", "mfu", "peak_memory_bytes", "compile_seconds", "peak_flops"):
        assert record[key] > 0, key
    assert record["shape"]["latents"] == latents
    batch, frames, height, width, _ = latents
    assert record["flops_per_step"] == transformer_flops_per_step(
        spec, frames, height, width, text_tokens, batch, kv_cached=True
    )
    assert record["mfu"] == pytest.approx(record["flops_per_step"] / record["seconds_per_step"] / record["peak_flops"])
    assert record["peak_memory_source"] == "process peak RSS" and record["device"].startswith("cpu")
    assert record["planned_peak_memory_bytes"] > 0


def test_demo_preset(tmp_path, capsys):
    record = _bench(tmp_path, "--model", "demo", "--steps", "1")
    _check_consistent(record, DEMO_TRANSFORMER, [2, 5, 16, 24, 16], 64)  # the preset's 192x128, 17 frames
    assert (record["model"], record["dtype"]) == ("demo", "float32")
    assert record["attention"] == GenerationConfig().resolved(default_platform()).denoiser.attention  # auto, resolved
    assert record["peak_flops_source"].startswith("measured")
    printed = capsys.readouterr().out
    assert "s/step" in printed and "MFU" in printed and "GiB peak" in printed


def test_a_step_cache_reports_the_steps_it_skipped_and_the_mean_step(tmp_path, capsys):
    """Any registered policy through --set; DBCache with threshold 1 reuses every step after its warm-up."""
    cache = ["--set", "cache_policy=dbcache", "--set", "Fn_compute_blocks=1", "--set", "max_warmup_steps=1"]
    record = _bench(tmp_path, "--steps", "3", *TINY, *cache, "--set", "residual_diff_threshold=1")
    assert (record["cache_policy"], record["steps_skipped"], record["steps"]) == ("dbcache", 3, 3)
    assert record["mean_seconds_per_step"] >= record["seconds_per_step"] > 0
    assert "step cache dbcache: 3 of 3 timed steps skipped" in capsys.readouterr().out
    dense = _bench(tmp_path, "--steps", "1", *TINY)
    assert (dense["cache_policy"], dense["steps_skipped"]) == ("none", 0)


def test_real_architecture_cut_to_one_layer_and_with_gguf_kernels_beside_it(tmp_path):
    """The same shape with the blocks' kernels as Q4_K blocks (`--kernels`, issue 44 item 5): its step
    time and peak reported as the unquantized run's are, its planned weights at 0.5625 bytes a value."""
    args = ("--model", "wan2.1-t2v-1.3b", "--layers", "1", "--steps", "1", *TINY)
    record, packed = _bench(tmp_path, *args), _bench(tmp_path, *args, "--kernels", "Q4_K")
    for run in (record, packed):
        _check_consistent(run, attrs.evolve(WAN21_T2V_1_3B, num_layers=1), [2, 2, 4, 4, 16], 512)
    assert record["layers"] == 1 and "vae_seconds" not in record
    assert (record["weights_dtype"], packed["weights_dtype"]) == ("float32", "Q4_K")
    _, kernels = transformer_parameters(attrs.evolve(WAN21_T2V_1_3B, num_layers=1))
    saved = record["planned_peak_memory_bytes"] - packed["planned_peak_memory_bytes"]
    assert saved == pytest.approx(kernels * (4 - 0.5625), rel=0.01)


def test_final_latents_written_for_comparison(tmp_path):
    latents = tmp_path / "latents" / "run.npy"
    latents.parent.mkdir()
    record = _bench(tmp_path, "--steps", "1", "--latents-out", str(latents), *TINY)
    array = np.load(latents)
    assert list(array.shape) == [1, *record["shape"]["latents"][1:]] and array.dtype == np.float32  # one video
    assert np.isfinite(array).all() and np.abs(array).max() > 0
    assert [p.name for p in latents.parent.iterdir()] == ["run.npy"]  # renamed into place


def test_vae_and_diffusers_beside(tmp_path, capsys):
    record = _bench(tmp_path, "--steps", "2", "--vae", "--vs", "diffusers", *TINY)
    assert record["vae_seconds"] > 0 and record["vae_compile_seconds"] > 0
    assert 0 < record["vae_peak_memory_bytes"] < record["run_peak_memory_bytes"]
    assert record["run_peak_memory_bytes"] >= record["peak_memory_bytes"]
    assert record["diffusers_vae_seconds"] > 0 and record["diffusers_vae_tiled_seconds"] > 0
    assert record["vae_speedup_over_diffusers"] == pytest.approx(record["diffusers_vae_seconds"] / record["vae_seconds"])
    assert record["diffusers_seconds_per_step"] > 0 and record["diffusers_device"] == "cpu"
    assert record["speedup_over_diffusers"] == pytest.approx(
        record["diffusers_seconds_per_step"] / record["seconds_per_step"]
    )
    assert record["diffusers_attention"] == "native (cpu)" and "diffusers_compiled_seconds_per_step" not in record
    printed = capsys.readouterr().out
    assert "vae decode" in printed and "at the decode's peak" in printed
    assert "s/step on cpu, eager, attention native (cpu): wanjax is" in printed


def test_compiled_diffusers_steps_go_through_torch_compile():
    """The tuned baseline's path, traced by dynamo (inductor's code generation takes minutes on a CPU:
    `--vs diffusers-compiled` uses it on a GPU, in the device check)."""
    import torch

    from wanjax.adapters.torch.diffusers_bench import time_diffusers_steps

    torch._dynamo.reset()
    spec = attrs.evolve(DEMO_TRANSFORMER, num_layers=1)
    steps = time_diffusers_steps(
        spec, (2, 2, 2, 2, spec.in_channels), 8, 0, guidance_scale=5.0, dtype="float32", device="cpu", steps=1,
        compile_backend="eager",
    )  # fmt: skip
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] >= 1  # the model ran as a captured graph
    assert steps.compiled_with == "eager" and steps.compile_seconds > 0 and steps.seconds_per_step > 0


@pytest.mark.parametrize(
    "args, message",
    [
        (["--layers", "0"], "--layers 0: must be between 1 and 2"),
        (["--model", "nope"], "bench --model 'nope': give a preset"),
        (["--num-frames", "8"], "num_frames=8"),
        # 14B at 720p with the exact reference attention: terabytes of logits, refused before building
        (["--model", "wan2.1-t2v-14b", "--attention", "xla"], "this request needs about"),
        (["--set", "cache_policy=dbcache", "--set", "Fn_compute_blocks=3"], "Fn_compute_blocks=3: this transformer has 2"),
    ],
)
def test_bad_input_fails_before_any_work(tmp_path, capsys, args, message):
    assert main(["bench", *args, "--json", str(tmp_path / "out.json")]) == 2
    assert f"wanjax: error: {message}" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def test_components_offload_reports_the_bytes_moved_per_run_and_the_expert_move(tmp_path, capsys):
    record = _bench(tmp_path, "--model", "demo", "--steps", "2", *TINY, "--set", "offload=components")
    total, _ = transformer_parameters(DEMO_TRANSFORMER)
    assert record["offload"] == "components" and record["offload_bytes_per_step"] == 0
    assert record["offload_bytes_per_run"] == total * 4  # the one expert's float32 weights, moved once
    assert record["weights_to_device_seconds"] > 0
    printed = capsys.readouterr().out
    assert "GiB per run of 2 steps" in printed and "an expert's weights to the device" in printed
