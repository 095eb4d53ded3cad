"""The README demo as a whole process: wanjax's CLI against diffusers' WanPipeline, paired.

Usage: .venv/bin/python tests/benchmarks/demo_process.py [--runs N] [--out-dir DIR]

Each round runs, as fresh processes in alternating order, the README command

    wanjax generate --prompt "a red fox running through fresh snow" --out fox.mp4

(the demo preset: 192x128, 17 frames, 8 steps, guidance 5, max_sequence_length 64), the
same with `--set text_embeddings_cache_dir=none` (the text encoder runs, as for a prompt
not seen before), that again with `--set text_encoder_backend=jax`, and this file's `diffusers` mode, which loads the same demo folder with
`WanPipeline.from_pretrained` and makes the same video (same prompt, empty negative
prompt, size, frames, steps, guidance, flow shift from the folder's scheduler config), then
writes it as an H.264 mp4 with PyAV (diffusers' `export_to_video` needs imageio or
OpenCV, which this venv does not have; PyAV is what wanjax writes with too). Wall time covers interpreter start to exit.
One unmeasured run of each comes first: it writes the demo checkpoint and fills JAX's
persistent compilation cache and the prompt's embeddings, as any earlier run of the README
command does. Prints every round, then the medians and the medians of the per-round ratios
(wanjax / diffusers).

The CPU is often shared: trust the paired ratios over the absolute seconds, and read the
CPU seconds (user + system of each process) beside the wall seconds: on a loaded machine
wall time follows CPU time more than the idle-machine parallelism.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROMPT = "a red fox running through fresh snow"
HEIGHT, WIDTH, FRAMES, STEPS, GUIDANCE, MAX_LEN, FPS = 128, 192, 17, 8, 5.0, 64, 16


def _diffusers(out: Path) -> None:
    """The reference: diffusers' pipeline on the demo folder, as a user would script it."""
    import av
    import torch
    from diffusers import WanPipeline

    from wanjax.adapters.demo.checkpoint import ensure_demo_checkpoint

    pipe = WanPipeline.from_pretrained(ensure_demo_checkpoint())
    frames = pipe(
        prompt=PROMPT, negative_prompt="", height=HEIGHT, width=WIDTH, num_frames=FRAMES,
        num_inference_steps=STEPS, guidance_scale=GUIDANCE, max_sequence_length=MAX_LEN,
        generator=torch.Generator().manual_seed(0), output_type="np",
    ).frames[0]  # fmt: skip
    with av.open(str(out), mode="w") as container:
        stream = container.add_stream("libx264", rate=FPS)
        stream.width, stream.height, stream.pix_fmt = WIDTH, HEIGHT, "yuv420p"
        stream.options = {"crf": "18"}
        for frame in (frames * 255).round().astype("uint8"):
            container.mux(stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")))
        container.mux(stream.encode())


def _commands(out_dir: Path) -> dict[str, list[str]]:
    wanjax = Path(sys.executable).with_name("wanjax")
    readme = [str(wanjax), "generate", "--prompt", PROMPT, "--out", str(out_dir / "fox.mp4")]
    return {
        "wanjax": readme,
        # The same with the prompt embeddings cache off: what a run with a new prompt costs.
        "wanjax-encode": [*readme, "--set", "text_embeddings_cache_dir=none"],
        # ... and with the JAX text encoder, which never imports torch.
        "wanjax-encode-jax": [*readme, "--set", "text_embeddings_cache_dir=none", "--set", "text_encoder_backend=jax"],
        "diffusers": [sys.executable, __file__, "diffusers", str(out_dir / "fox-diffusers.mp4")],
    }


def _timed(command: list[str]) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system, all threads) of one run of `command`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def measure(runs: int, out_dir: Path) -> dict[str, float]:
    commands = _commands(out_dir)
    for command in commands.values():  # the demo checkpoint and the compilation cache, as after any first run
        _timed(command)
    times: dict[str, list[float]] = {name: [] for name in commands}
    cpu: dict[str, list[float]] = {name: [] for name in commands}
    for i in range(runs):
        order = list(commands) if i % 2 == 0 else list(reversed(commands))  # none always runs first
        for name in order:
            wall, seconds = _timed(commands[name])
            times[name].append(wall)
            cpu[name].append(seconds)
        print(f"round {i + 1}: " + ", ".join(f"{name} {times[name][-1]:.2f} s (cpu {cpu[name][-1]:.1f} s)"
                                             for name in commands), flush=True)  # fmt: skip
    summary = {f"{name}_median_s": statistics.median(times[name]) for name in commands}
    summary.update({f"{name}_cpu_median_s": statistics.median(cpu[name]) for name in commands})
    for name in ("wanjax", "wanjax-encode", "wanjax-encode-jax"):  # per-round ratios, then their median
        summary[f"{name}/diffusers"] = statistics.median(
            w / d for w, d in zip(times[name], times["diffusers"], strict=True)
        )
    print(", ".join(f"{k} {v:.2f}" for k, v in summary.items()))
    return summary


def main() -> None:
    if sys.argv[1:2] == ["diffusers"]:
        _diffusers(Path(sys.argv[2]))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="rounds (default 5)")
    parser.add_argument("--out-dir", type=Path, help="where the videos go (default: a temporary folder)")
    args = parser.parse_args()
    if args.out_dir is not None:
        args.out_dir.mkdir(parents=True, exist_ok=True)
        measure(args.runs, args.out_dir)
        return
    with tempfile.TemporaryDirectory() as folder:
        measure(args.runs, Path(folder))


if __name__ == "__main__":
    main()
