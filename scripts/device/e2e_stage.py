"""The device check's end-to-end stages (issue 46): the real `wanjax generate`, each run a fresh
process from its start to the frames on the host (written as .npy: the kit has no mp4 encoder),
its time split by the CLI's own trace (`--timings`) into load, text encoding (the `conditioning`
span: the prompts' encoding and the noise), compile, denoise, VAE decode and write, the rest of the
process's wall time (start-up, imports, checks) beside them, and its device peak beside its memory
plan.

The weights are random at the published architectures (no network on the GPU hosts), written once
per check into the work folder (`$WANJAX_CACHE`, never OUT) by the general random-checkpoint writer
(adapters/demo/random_checkpoint.py) in bf16: umt5-xxl's encoder at its real size (with the demo's
98-id tokenizer), the transformer(s) and the VAE. Wan 2.2 A14B's second expert is a link to the
first's folder (the GPU host's disk is 64 GiB; identical random experts time the same), the text
encoder is written once and linked into each checkpoint, and the folder holds one architecture's
transformer at a time. The files were just written, so the load reads them from the page cache.
Random weights decide TeaCache's skips differently from real ones (MagCache's follow its published
curve, not the weights).

In the smoke run every stage runs its preset at the demo's size with a few steps, on a tiny
architecture of the same kind through the same writer and flags.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import attrs
import numpy as np
from commands import WANJAX, run

from wanjax.adapters.demo.checkpoint import DEMO_ARCHITECTURE, DEMO_TEXT_DIM, default_cache_dir, ensure_written
from wanjax.adapters.demo.random_checkpoint import demo_umt5_sizes, write_random_checkpoint, write_random_text_encoder
from wanjax.adapters.torch.demo_tokenizer import DEMO_VOCAB_SIZE
from wanjax.domain.architectures import UMT5_XXL_ENCODER, WAN22_VAE, Architecture, published_architecture

PROMPT = "a red fox running through fresh snow at dawn, cinematic, detailed fur"
SETTINGS = ("text_encoder_backend=jax",)  # the text encoder on the device with the rest (no torch on the smoke host)
SMOKE_SIZE = (192, 128, 17)  # the demo preset's
# nvidia-smi's memory.total of an H100 80GB HBM3 (MiB): with the check's XLA_PYTHON_CLIENT_MEM_FRACTION
# (0.92) JAX gets 73.3 GiB of it, the memory `offload=auto` plans against there.
H100_MEMORY_MIB = 81559
SMOKE_ARCHITECTURES = {  # a tiny architecture of each kind: the demo's, with the published one's shape
    "Wan-AI/Wan2.1-T2V-1.3B-Diffusers": DEMO_ARCHITECTURE,
    "Wan-AI/Wan2.2-TI2V-5B-Diffusers": attrs.evolve(
        DEMO_ARCHITECTURE, first_frame=True,
        transformer=attrs.evolve(DEMO_ARCHITECTURE.transformer, in_channels=48, out_channels=48),
        vae=attrs.evolve(WAN22_VAE, base_dim=8, decoder_base_dim=16, num_res_blocks=1),
    ),  # fmt: skip
    "Wan-AI/Wan2.2-T2V-A14B-Diffusers": attrs.evolve(DEMO_ARCHITECTURE, num_experts=2, boundary_ratio=0.875),
}


@dataclass(frozen=True)
class EndToEnd:
    """One stage: `preset` at `size` (width, height, frames) for `steps` steps, with `settings`."""

    name: str
    preset: str
    repo_id: str
    size: tuple[int, int, int]
    steps: int
    settings: tuple[str, ...] = ()
    smoke_steps: int = 2
    smoke_settings: tuple[str, ...] = ()  # added in the smoke run, for its tiny architecture

    def __call__(self, out: Path, smoke: bool) -> dict:
        folder, written = _checkpoint(self.repo_id, smoke)
        size, steps = (SMOKE_SIZE, self.smoke_steps) if smoke else (self.size, self.steps)
        settings = (*self.settings, *self.smoke_settings) if smoke else self.settings
        run = _generate(self.name, self.preset, folder, size, steps, settings, out)
        return {"preset": self.preset, "architecture": self.repo_id, "checkpoint": written, **run}


@dataclass(frozen=True)
class ExpertsEndToEnd:
    """Wan 2.2 A14B: its `steps` take longer than one device call may run, so the whole pipeline runs
    with `run_steps` (half on each expert) and the full video's time is computed from the measured
    parts: the run's every phase but the denoising, its first step (inputs, KV caches, each expert's
    weights copied in where the plan offloads them), and per expert one step's time and the switch
    step, times the full run's step counts. The offload is what the memory plan chooses for an
    80 GB H100 (`wanjax plan --device-memory`), whatever the card."""

    name: str
    preset: str
    repo_id: str
    size: tuple[int, int, int]
    steps: int
    run_steps: int = 4

    def __call__(self, out: Path, smoke: bool) -> dict:
        folder, written = _checkpoint(self.repo_id, smoke)
        size = SMOKE_SIZE if smoke else self.size
        offload, planned_for = _offload_for_80gb(self.preset, folder, size)
        switch = self.run_steps // 2
        settings = (f"offload={offload}", f"expert_switch_step={switch}")
        run = _generate(self.name, self.preset, folder, size, self.run_steps, settings, out)
        counts = _steps_per_expert(self.preset, folder, self.steps, _architecture(self.repo_id, smoke))
        computed = _full_run(run, switch, counts)
        return {"preset": self.preset, "architecture": self.repo_id, "checkpoint": written,
                "offload": {"chosen": offload, "planned_for_device_bytes": planned_for},
                "measured": run, "computed": computed}  # fmt: skip


def _checkpoint(repo_id: str, smoke: bool) -> tuple[Path, dict]:
    """The random checkpoint of `repo_id` (its tiny twin in the smoke run) in the work folder, written
    if absent, with what writing it took; other architectures' checkpoints there are removed first."""
    cache = default_cache_dir() / "e2e"
    architecture = _architecture(repo_id, smoke)
    sizes = demo_umt5_sizes(DEMO_VOCAB_SIZE, DEMO_TEXT_DIM) if smoke else UMT5_XXL_ENCODER
    target = cache / f"{'smoke-' if smoke else ''}{repo_id.replace('/', '--')}"
    if (target / "model_index.json").is_file():
        return target, {"written": "earlier in this check"}
    start = time.perf_counter()
    encoder = ensure_written(
        cache / ("text-encoder-smoke" if smoke else "text-encoder-umt5-xxl"),
        lambda folder: write_random_text_encoder(folder, sizes, dtype="bfloat16"),
        marker="model.safetensors",
    )
    for other in cache.glob("*--*"):
        shutil.rmtree(other)  # the GPU host's disk holds one architecture at a time beside the text encoder
    ensure_written(target, lambda folder: write_random_checkpoint(
        folder, architecture, sizes, dtype="bfloat16", text_encoder_folder=encoder, linked_experts=True))
    return target, {"write_seconds": round(time.perf_counter() - start, 1), "bytes": _bytes(target),
                    "weights": "random, bfloat16; tokenizer: the demo's (98 ids)"}  # fmt: skip


def _architecture(repo_id: str, smoke: bool) -> Architecture:
    return SMOKE_ARCHITECTURES[repo_id] if smoke else published_architecture(repo_id)


def _bytes(folder: Path) -> int:
    """Bytes of the files under `folder`, following its links (the shared text encoder) but each file once."""
    files = {path.resolve() for path in folder.rglob("*")} | {
        path.resolve() for link in folder.iterdir() if link.is_symlink() for path in link.resolve().rglob("*")}
    return sum(path.stat().st_size for path in files if path.is_file())


def _generate(name: str, preset: str, folder: Path, size: tuple[int, int, int], steps: int,
              settings: tuple[str, ...], out: Path) -> dict:  # fmt: skip
    """`wanjax generate` in a fresh process: its wall time, the trace's phases, the steps, the memory."""
    width, height, frames = size
    frames_file, timings = default_cache_dir() / "e2e" / f"{name}.npy", out / f"{name}_timings.json"
    argv = [*WANJAX, "generate", "--model", preset, "--set", f"model={folder}", "--prompt", PROMPT,
            "--width", str(width), "--height", str(height), "--num-frames", str(frames), "--steps", str(steps),
            "--quiet", "--out", str(frames_file), "--timings", str(timings)]  # fmt: skip
    for item in (*SETTINGS, *settings):
        argv += ["--set", item]
    start = time.perf_counter()
    run(argv)
    wall = time.perf_counter() - start
    shape = list(np.load(frames_file, mmap_mode="r").shape)
    frames_file.unlink()
    report = json.loads(timings.read_text())
    phases = report["seconds"]
    seconds = {
        "process": wall,
        "load": phases.get("load", 0.0),
        "text_encoding": phases.get("conditioning", 0.0),
        "compile": phases.get("compile", 0.0),
        "denoise": phases.get("denoise", 0.0),
        "decode": phases.get("vae_decode", 0.0),
        "write": phases.get("write", 0.0),
    }
    seconds["startup_and_checks"] = wall - sum(phases.values())
    return {
        "command": " ".join(argv[2:]),
        "size": f"{width}x{height}x{frames}",
        "seconds_by_phase": {key: round(value, 3) for key, value in seconds.items()},  # "seconds": the stage's
        "seconds_per_step": round(phases.get("denoise", 0.0) / steps, 4),
        "step_seconds": [round(s, 4) for s in report["step_seconds"]],
        "steps": report["steps"],
        "memory": report["memory"],
        "frames_shape": shape,
    }


def _offload_for_80gb(preset: str, folder: Path, size: tuple[int, int, int]) -> tuple[str, int]:
    """The offload `offload=auto` chooses for this run on an 80 GB H100 (JAX's share of it), and that share."""
    width, height, frames = size
    fraction = float(os.environ.get("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.75"))
    device = int(H100_MEMORY_MIB * 2**20 * fraction)
    argv = [*WANJAX, "plan", "--model", preset, "--set", f"model={folder}", "--prompt", PROMPT,
            "--width", str(width), "--height", str(height), "--num-frames", str(frames),
            "--device-memory", str(device), "--set", "offload=auto"]  # fmt: skip
    for item in SETTINGS:
        argv += ["--set", item]
    printed = run(argv, env={"JAX_PLATFORMS": "cpu"})
    line = next(line for line in printed.splitlines() if line.startswith("memory plan ("))
    return line.split("offload=", 1)[1].split()[0].rstrip("):"), device


def _steps_per_expert(preset: str, folder: Path, steps: int, architecture: Architecture) -> list[int]:
    """How many of the preset's `steps` each expert runs (its boundary on the sampling plan)."""
    from wanjax.application.presets import resolve_config
    from wanjax.domain.plan import plan_sampling

    request = resolve_config(preset, {"model": str(folder)}).request(PROMPT, num_inference_steps=steps)
    plan = plan_sampling(request, num_experts=2, model_boundary_ratio=architecture.boundary_ratio)
    return [int(count) for count in np.bincount(plan.experts, minlength=2)]


def _full_run(run: dict, switch: int, counts: list[int]) -> dict:
    """The full run's time from the measured parts of `run` (its experts switching after step `switch`)."""
    intervals = run["step_seconds"]  # interval i: from step i's end to step i + 1's
    high = intervals[: switch - 1]  # steps 2..switch: the high-noise expert's
    low = intervals[switch:]  # steps switch + 2..: the low-noise expert's
    first_step = run["seconds_by_phase"]["denoise"] - sum(intervals)
    step_high, step_low, switch_step = float(np.median(high)), float(np.median(low)), intervals[switch - 1]
    denoise = first_step + (counts[0] - 1) * step_high + switch_step + (counts[1] - 1) * step_low
    others = {key: value for key, value in run["seconds_by_phase"].items() if key not in ("process", "denoise")}
    return {
        "steps": sum(counts),
        "steps_per_expert": counts,
        "from_measured": {"first_step": round(first_step, 3), "high_noise_step": round(step_high, 3),
                          "switch_step": round(switch_step, 3), "low_noise_step": round(step_low, 3),
                          "phases_but_denoise": others},  # fmt: skip
        "denoise_seconds": round(denoise, 2),
        "video_seconds": round(sum(others.values()) + denoise, 2),
        "note": "computed: first step + (high - 1) high-noise steps + the switch step + (low - 1) low-noise "
        "steps, plus every other phase of the measured run (load, text encoding, compile, decode, write, start-up)",
    }


def _stages() -> tuple[EndToEnd | ExpertsEndToEnd, ...]:
    t2v_13b, ti2v, a14b = "Wan-AI/Wan2.1-T2V-1.3B-Diffusers", "Wan-AI/Wan2.2-TI2V-5B-Diffusers", "Wan-AI/Wan2.2-T2V-A14B-Diffusers"
    return (
        EndToEnd("e2e_13b_480p_81", "wan2.1-t2v-1.3b", t2v_13b, (832, 480, 81), 50),
        # the presets' published thresholds (docs/caching.md): MagCache E012K2R02, TeaCache 0.08
        EndToEnd("e2e_13b_480p_81_magcache", "wan2.1-t2v-1.3b", t2v_13b, (832, 480, 81), 50,
                 ("cache_policy=magcache",), smoke_steps=4),
        EndToEnd("e2e_13b_480p_81_teacache", "wan2.1-t2v-1.3b", t2v_13b, (832, 480, 81), 50,
                 ("cache_policy=teacache",), smoke_steps=4),
        # cache-dit's DBCache defaults (F8B0, threshold 0.08, 8 warm-up steps) with its TaylorSeer, order 1;
        # the smoke run's twin has fewer blocks than 8, and a step after one warm-up step may reuse
        EndToEnd("e2e_13b_480p_81_dbcache", "wan2.1-t2v-1.3b", t2v_13b, (832, 480, 81), 50,
                 ("cache_policy=dbcache", "enable_taylorseer=true"), smoke_steps=4,
                 smoke_settings=("Fn_compute_blocks=1", "max_warmup_steps=1", "residual_diff_threshold=1")),
        EndToEnd("e2e_ti2v_5b_704p_121", "wan2.2-ti2v-5b", ti2v, (1280, 704, 121), 50),
        ExpertsEndToEnd("e2e_a14b_720p_81", "wan2.2-t2v-a14b", a14b, (1280, 720, 81), 40),
    )  # fmt: skip


E2E = {stage.name: stage for stage in _stages()}
