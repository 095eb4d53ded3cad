"""`wanjax generate`: one video from a prompt, on a preset, a checkpoint folder or a hub id."""

from __future__ import annotations

from wanjax.entrypoints.interrupts import (
    Interrupted,
    Stops,
    end_at_once_on_signals,
    run_to_exit,
    signals_interrupt,
    stopped_line,
)

if __name__ == "__main__":  # `python -m wanjax.entrypoints.cli` (the `wanjax` script: entrypoints/program.py)
    end_at_once_on_signals()  # before the imports below: a signal while they load ends the run cleanly

import argparse
import os
import sys
import time
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from wanjax.domain.bench import BenchResult
from wanjax.domain.errors import ConfigError, InvalidRequestError, WanjaxError
from wanjax.domain.modes.registry import requested_mode
from wanjax.entrypoints.arguments import OneLineParser, decimal_number, memory_size, whole_number
from wanjax.entrypoints.cache_help import cache_epilog
from wanjax.entrypoints.serve import add_serve_parser

if TYPE_CHECKING:
    from wanjax.application.memory import DeviceSize
    from wanjax.domain.config import GenerationConfig
    from wanjax.domain.requests import GenerationRequest

# CLI flag -> config key; each is also reachable as --set key=value
FLAG_KEYS = {
    "negative_prompt": "negative_prompt",
    "height": "height",
    "width": "width",
    "num_frames": "num_frames",
    "steps": "num_inference_steps",
    "guidance_scale": "guidance_scale",
    "guidance_scale_low": "guidance_scale_low",
    "seed": "seed",
    "dtype": "dtype",
    "lora": "loras",
    "lora_low": "loras_low",
    "strength": "strength",
}


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="wanjax", description="Wan video generation in JAX.")
    commands = parser.add_subparsers(dest="command", required=True)
    cached = {"epilog": cache_epilog(), "formatter_class": argparse.RawDescriptionHelpFormatter}
    gen = commands.add_parser("generate", help="generate a video per --prompt, in one batch", **cached)
    plan = commands.add_parser(
        "plan", help="print what `generate` with the same flags would hold in memory at its peak; loads no weights",
        **cached,
    )
    for sub in (gen, plan):
        _add_generation_arguments(sub)
    gen.add_argument("--timings", type=Path, metavar="FILE",
                     help="also write the timing summary, each step's seconds, the steps a step cache skipped "
                     "and the memory plan beside the device's peak, as JSON")
    plan.add_argument("--device-memory", metavar="SIZE", type=memory_size,
                      help="plan for an accelerator with SIZE of memory, e.g. 24GiB (default: this machine's device)")
    plan.add_argument("--host-memory", metavar="SIZE", type=memory_size,
                      help="the host memory to plan offloaded weights against, e.g. 128GiB (default: this machine's)")
    commands.add_parser("presets", help="list the presets")
    _add_bench_parser(commands)
    add_serve_parser(commands)
    return parser


def _add_generation_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of `generate`, which `plan` shares."""
    parser.add_argument("--model", help="preset name, checkpoint folder or Hugging Face repo id (default: demo)")
    parser.add_argument("--prompt", action="append", required=True,
                        help="repeatable: one video per prompt, all in one batch (video i uses seed + i)")
    parser.add_argument("--negative-prompt")
    _add_mode_inputs(parser)
    parser.add_argument("--strength", type=decimal_number(),
                        help="video-to-video: share of the steps run on the noised video, in (0, 1] (default 0.8)")
    parser.add_argument("--height", type=whole_number())
    parser.add_argument("--width", type=whole_number())
    parser.add_argument("--num-frames", type=whole_number(), help="4k+1 frames, e.g. 81")
    parser.add_argument("--steps", type=whole_number(), help="denoising steps")
    parser.add_argument("--guidance-scale", type=decimal_number(), help="guidance (of the high-noise expert on Wan 2.2 A14B)")
    parser.add_argument("--guidance-scale-low", type=decimal_number(), help="guidance of the low-noise expert (Wan 2.2 A14B)")
    parser.add_argument("--seed", type=whole_number())
    parser.add_argument("--dtype", help="float32 | bfloat16 (default: bfloat16 on accelerators, float32 on CPU)")
    parser.add_argument("--lora", action="append", metavar="PATH[:SCALE]",
                        help="LoRA merged into the transformer (Wan 2.2 A14B: the high-noise expert); repeatable")
    parser.add_argument("--lora-low", action="append", metavar="PATH[:SCALE]",
                        help="LoRA merged into the low-noise expert of Wan 2.2 A14B models; repeatable")
    parser.add_argument("--out", type=Path, default=Path("output.mp4"), help=".mp4, or .npy for uint8 frames [B, F, H, W, 3]")
    parser.add_argument("--latents", type=Path,
                        help=".npy initial noise [B, C, F', H', W'] (diffusers layout); with --video, the noise mixed into it")
    parser.add_argument("--output-type", choices=("video", "latent"), default="video", help="latent: final latents as .npy")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="any config key (the step caches' below); repeatable")
    parser.add_argument("--quiet", action="store_true", help="no progress bar or timing summary")
    parser.add_argument("--verbose", action="store_true", help="also print the sampling settings (and where each came from) and the memory plan before loading")
    group = parser.add_argument_group(
        "multi-process (one process per host; process 0 writes the output)",
        "Each setting is read from its flag, else from its environment variable. Give all three, or none "
        "for a single process. Every process runs the same command; the mesh (--set mesh_data=...) spans "
        "the devices of all of them.",
    )
    group.add_argument("--coordinator-address", metavar="HOST:PORT",
                       help="where process 0 serves the coordinator (else JAX_COORDINATOR_ADDRESS)")
    group.add_argument("--num-processes", type=whole_number(), help="how many processes (else JAX_NUM_PROCESSES)")
    group.add_argument("--process-id", type=whole_number(), help="this process's index, from 0 (else JAX_PROCESS_ID)")


def _add_mode_inputs(parser: argparse.ArgumentParser) -> None:
    """A flag per input field of the generation modes (domain/modes/registry.py), its help each mode's."""
    from wanjax.domain.modes.registry import flag_help, input_fields

    for field in input_fields():
        repeat = {"action": "append", "default": []} if field.repeatable else {}
        parser.add_argument(field.flag, type=Path, help=flag_help(field.flag), **repeat)


def _add_bench_parser(commands: argparse._SubParsersAction) -> None:
    from wanjax.domain.attention import ATTENTION_BACKENDS
    from wanjax.domain.bench import BASELINES
    from wanjax.domain.quantization import STORED_KERNELS
    from wanjax.domain.settings import DTYPES

    bench = commands.add_parser(
        "bench", help="time a preset's transformer (random weights, no checkpoint) per guided denoising step",
        epilog=cache_epilog(), formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    bench.add_argument("--model", default="demo", help="preset name or published Wan repo id (default: demo)")
    bench.add_argument("--layers", type=whole_number(), help="run only the first N layers of the architecture")
    bench.add_argument("--steps", type=whole_number(), help="timed denoising steps (default: 3)")
    bench.add_argument("--height", type=whole_number(), help="default: the preset's")
    bench.add_argument("--width", type=whole_number(), help="default: the preset's")
    bench.add_argument("--num-frames", type=whole_number(), help="4k+1 frames; default: the preset's")
    bench.add_argument("--attention", choices=ATTENTION_BACKENDS, help="default: the preset's")
    bench.add_argument("--dtype", choices=DTYPES, help="default: the preset's (auto: bfloat16, float32 on CPU)")
    bench.add_argument("--vae", action="store_true", help="also time one VAE decode of the latents")
    bench.add_argument("--kernels", choices=STORED_KERNELS, help="the blocks' kernels as a quantized file keeps "
                       "them on the device: a GGUF block type (packed) or scaled_fp8 (default: weights_dtype)")
    bench.add_argument("--vs", choices=BASELINES, help="also time diffusers' WanTransformer3DModel, same shapes: "
                       "eager, or eager and under torch.compile (diffusers-compiled; minutes of compiling)")
    bench.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                       help="any config key, e.g. weights_dtype=float8_e4m3fn or vae_convolution=3d; repeatable")
    bench.add_argument("--profile", type=Path, metavar="DIR",
                       help="trace the timed steps with JAX's profiler into DIR (TensorBoard/XProf and Perfetto files)")
    bench.add_argument("--json", type=Path, help="write the result as one JSON object to this file")
    bench.add_argument("--latents-out", type=Path, metavar="FILE.npy",
                       help="write the final latents (float32) here, to compare runs that differ in a numeric setting")


def main(argv: Sequence[str] | None = None) -> int:
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # ours is the only progress bar
    try:
        with signals_interrupt() as stops:  # first: takes the signals over from end_at_once_on_signals
            status = _run_command(build_parser().parse_args(argv), stops)
            stops.check()  # a signal whose exception something swallowed still stops the run
            return status
    except WanjaxError as err:
        print(f"wanjax: error: {err}", file=sys.stderr)
        return 2
    except Interrupted as stop:
        print(stopped_line(stop.signum), file=sys.stderr)
        return stop.exit_status


def _run_command(args: argparse.Namespace, stops: Stops) -> int:
    if args.command == "presets":
        from wanjax.application.presets import preset_names

        print("\n".join(preset_names()))
        return 0
    if args.command == "plan":
        return _generate(args, stops, plan_only=True)
    if args.command == "bench":
        return _bench(args)
    if args.command == "serve":
        from wanjax.entrypoints.serve import serve

        return serve(args, set_overrides(args), stops)
    return _generate(args, stops)


def set_overrides(args: argparse.Namespace) -> dict[str, object]:
    """The `--set KEY=VALUE` items and the flags that stand for config keys, as raw overrides."""
    overrides = set_items(args.set)
    for flag, key in FLAG_KEYS.items():
        value = getattr(args, flag, None)  # `serve` has --set alone
        if value is not None:
            overrides[key] = value
    return overrides


def set_items(items: Sequence[str]) -> dict[str, object]:
    """`--set KEY=VALUE` items as raw overrides; a malformed one is a ConfigError."""
    overrides: dict[str, object] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set {item!r}: expected KEY=VALUE, e.g. --set scan_layers=false")
        overrides[key.strip()] = value
    return overrides


def _read_latents(path: Path) -> np.ndarray:
    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError) as err:
        raise InvalidRequestError(f"--latents {path}: cannot read a .npy array ({err})") from None


def _requests(config: GenerationConfig, prompts: Sequence[str], media: dict[str, Any]) -> list[GenerationRequest]:
    """One request per prompt, each with the input `media` (request fields); video i gets seed + i."""
    from wanjax.domain.requests import MAX_SEED

    seed = config.sampling.seed
    last = seed + len(prompts) - 1
    if len(prompts) > 1 and 0 <= seed <= MAX_SEED < last:
        raise ConfigError(
            f"seed={seed} with {len(prompts)} prompts: video i uses seed + i, up to {last}, past the "
            f"largest seed {MAX_SEED}; give a seed of at most {MAX_SEED - len(prompts) + 1}"
        )
    return [config.request(prompt, **media, seed=seed + i) for i, prompt in enumerate(prompts)]


def _join_process_group(args: argparse.Namespace) -> None:
    """A multi-process run joins its group before anything else touches JAX; one process does nothing."""
    from wanjax.adapters.jax.platform.distributed import initialize, process_group

    group = process_group(
        os.environ,
        coordinator_address=args.coordinator_address,
        num_processes=args.num_processes,
        process_id=args.process_id,
    )
    if group is not None:
        initialize(group)


def _generate(args: argparse.Namespace, stops: Stops, *, plan_only: bool = False) -> int:
    """`generate`, or with `plan_only` (`wanjax plan`) everything up to its memory plan, printed.
    `stops` is asked at each step and between phases, and last when the output is renamed into place."""
    _join_process_group(args)
    from wanjax.adapters.jax.platform.distributed import is_primary
    from wanjax.application.caches import configure_compilation_cache
    from wanjax.application.container import build_container
    from wanjax.application.outputs import (
        calibration_path,
        check_output_path,
        output_paths,
        streamed_output,
        write_calibration,
        write_output,
    )
    from wanjax.application.presets import resolve_config
    from wanjax.domain.modes.base import ModelTraits
    from wanjax.entrypoints.flag_inputs import flag_inputs

    published = plan_only and _not_downloaded(args)  # planned from its published architecture
    config = resolve_config(args.model, set_overrides(args), read_checkpoint=not published)
    configure_compilation_cache(config.startup.compilation_cache_dir)  # process-global: this process is ours
    container = build_container(config)
    if published:
        from dependency_injector import providers

        from wanjax.application.builders import replaced_files
        from wanjax.application.published import PublishedCheckpoint

        published_model = PublishedCheckpoint.of(config.model.location, replaced_files(config.model))
        container.checkpoint.override(providers.Object(published_model))
    size = _planned_size(args, container) if plan_only else None
    model = lambda: ModelTraits.of(container.checkpoint())  # noqa: E731
    requests = _requests(config, args.prompt, flag_inputs(args, config, model, probed=plan_only))
    request = requests[0]
    output_type = "latent" if args.output_type == "latent" else "frames"
    check_output_path(args.out, output_type)
    if getattr(args, "timings", None) is not None:  # `plan` has no such flag
        from wanjax.application.run_report import check_report_path

        check_report_path(args.timings)
    latents = _read_latents(args.latents) if args.latents else None

    if published or size is not None:  # no weights here, or another machine's memory: this one's devices unchecked
        from wanjax.application.memory import DeviceSize, MemoryPlanner

        planner = MemoryPlanner(container.settings(), container.checkpoint(), size or DeviceSize())
        plan = planner.check(request, batch=len(requests))
        print(f"{config.describe()}\n{plan.summary()}")
        return 0
    service = container.service()
    service.check(requests)
    plan = container.memory_planner().check(request, batch=len(requests))  # refuses what cannot fit
    if is_primary():  # the only process that writes; the others' file systems may not have the folder
        latent_shape = (len(requests), *service.geometry(request).diffusers_shape[1:])
        frames = requested_mode(request).output_frames(request)  # Animate: its pose video's length
        frames_shape = (len(requests), frames, request.height, request.width, 3)
        check_output_path(args.out, output_type, latent_shape if output_type == "latent" else frames_shape)
    if plan_only or args.verbose:
        print(f"{config.describe()}\n{plan.summary()}", file=sys.stdout if plan_only else sys.stderr)
    if plan_only:
        return 0
    warmup = None
    if config.startup.warmup:
        warmup = service.warmup(requests, initial_latents=latents, output_type=output_type)
        stops.check()
    progress = StepProgress(disable=args.quiet)
    step_ends: list[float] = []

    def on_step(done: int, total: int) -> None:
        stops.check()
        step_ends.append(time.perf_counter())
        progress(done, total)

    written = output_paths(args.out, len(requests))
    # The video is written as it is made, under temporary names; once renamed into place the run is
    # over: a signal after it no longer stops the rest. The others of a multi-process run drop theirs.
    with ExitStack() as output:
        on_frames = lambda frames: None  # noqa: E731
        if is_primary() and output_type == "frames":
            on_frames = output.enter_context(
                streamed_output(args.out, len(requests), config.sampling.fps, committing=stops.committing)
            )
        try:
            result = service.generate_batch(
                requests, initial_latents=latents, output_type=output_type, on_step=on_step,
                on_frames=None if output_type == "latent" else on_frames,
            )  # fmt: skip
        finally:
            progress.close()
        stops.check()
        finishing = time.perf_counter()
    finished = time.perf_counter() - finishing  # the videos' last frames flushed, the files renamed into place
    if warmup is not None:  # the load happened in the warm-up; the rest of it is one line
        load = warmup.seconds.pop("load", 0.0)
        result.trace.add("load", load)
        result.trace.add("warmup", sum(warmup.seconds.values()))
    if not is_primary():
        print(f"wanjax: not process 0: skipped writing {args.out} (process 0 writes it)", file=sys.stderr)
        return 0
    if result.array is None:
        result.trace.add("write", finished)
    else:  # latents: one array, written whole
        with result.trace.span("write"):
            write_output(result.array, args.out, config.sampling.fps, committing=stops.committing)
    if result.calibration is not None:
        written.append(calibration_path(args.out))
        dtype = container.settings().model.dtype
        steps, shift = request.num_inference_steps, request.flow_shift
        title = f"{config.model.location}, {dtype}, {steps} steps, flow_shift {shift}"
        write_calibration(result.calibration, written[-1], title)
    if getattr(args, "timings", None) is not None:
        from wanjax.adapters.jax.bench import peak_memory
        from wanjax.application.run_report import run_report, write_run_report

        report = run_report(result.trace, step_ends, result.cache_report, plan, device_peak=peak_memory())
        write_run_report(args.timings, report)
        written.append(args.timings)
    if not args.quiet:
        print(result.trace.summary())
        if request.cache.policy != "none":
            report = result.cache_report
            print(f"cache_policy={request.cache.policy}: {report.steps_skipped} of {report.num_steps} steps skipped")
    print("\n".join(f"wrote {path}" for path in written))
    return 0


def _not_downloaded(args: argparse.Namespace) -> bool:
    """`--model` is a published model whose weights are not on this machine."""
    from wanjax.adapters.checkpoints.locate import local_checkpoint
    from wanjax.application.presets import resolve_config
    from wanjax.domain.architectures import ARCHITECTURES

    location = resolve_config(args.model, set_overrides(args), read_checkpoint=False).model.location
    return location in ARCHITECTURES and local_checkpoint(location) is None


def _planned_size(args: argparse.Namespace, container: Any) -> DeviceSize | None:
    """`plan --device-memory/--host-memory`: the sizes to plan for, None without them. A device
    size plans for an accelerator: on a CPU machine the config resolves as on a GPU (bfloat16)."""
    from wanjax.application.memory import DeviceSize

    if args.device_memory is None and args.host_memory is None:
        return None
    if args.device_memory is not None and container.platform() == "cpu":
        container.platform.override("gpu")
    return DeviceSize(args.device_memory, args.host_memory)


def _bench(args: argparse.Namespace) -> int:
    from wanjax.application.bench import BenchOptions, run_bench, write_bench_json

    flags = ("layers", "steps", "height", "width", "num_frames", "attention", "dtype", "kernels")
    given = {key: getattr(args, key) for key in flags}
    options = BenchOptions(
        model=args.model, vae=args.vae, vs=args.vs, overrides=set_items(args.set),
        profile_dir=args.profile, latents_out=args.latents_out,
        **{key: value for key, value in given.items() if value is not None},
    )  # fmt: skip
    result = run_bench(options)
    print(bench_report(result))
    if args.json is not None:
        write_bench_json(result, args.json)
        print(f"wrote {args.json}")
    return 0


def bench_report(result: BenchResult) -> str:
    """The human-readable lines of a benchmark result."""
    shape = result.shape
    lines = [
        f"model      {result.model}, {result.layers} layers, {shape['width']}x{shape['height']}, "
        f"{shape['num_frames']} frames -> latents {shape['latents']}, {result.dtype} (weights {result.weights_dtype}), attention {result.attention}",
        f"device     {result.device}",
        f"compile    {result.compile_seconds:.2f} s",
        f"denoise    {result.seconds_per_step:.4f} s/step over {result.steps} steps, "
        f"{result.flops_per_step / 1e12:.4g} TFLOP/step, {result.flops_per_second / 1e12:.4g} TFLOP/s",
        f"MFU        {result.mfu:.1%} of {result.peak.flops / 1e12:.4g} TFLOP/s ({result.peak.source})",
        f"memory     {result.memory.bytes / 2**30:.2f} GiB peak before the VAE ({result.memory.source}); "
        f"{result.run_memory.bytes / 2**30:.2f} GiB the whole run's; planned {result.planned_memory_bytes / 2**30:.2f} GiB",
    ]
    if result.cache_policy != "none":
        lines.append(
            f"step cache {result.cache_policy}: {result.steps_skipped} of {result.steps} timed steps skipped, "
            f"{result.mean_seconds_per_step:.4f} s/step on average"
        )
    if result.offload_bytes_per_run:
        per_step = f"{result.offload_bytes_per_step / 2**20:.1f} MiB per step, " if result.offload_bytes_per_step else ""
        lines.append(
            f"offload    {result.offload}: weights moved to the device: {per_step}"
            f"{result.offload_bytes_per_run / 2**30:.2f} GiB per run of {result.steps} steps"
        )
    if result.weights_to_device_seconds is not None:
        lines.append(f"phases     an expert's weights to the device {result.weights_to_device_seconds:.3f} s; "
                     f"denoising {result.seconds_per_step:.4f} s/step")  # fmt: skip
    if result.vae_seconds is not None:
        lines.append(f"vae decode {result.vae_seconds:.3f} s (compile {result.vae_compile_seconds:.2f} s)")
    if result.vae_memory is not None:
        lines.append(f"vae memory {result.vae_memory.bytes / 2**30:.2f} GiB at the decode's peak ({result.vae_memory.source})")
    if result.diffusers_vae_seconds is not None and result.vae_seconds is not None:
        untiled, tiled = result.diffusers_vae_seconds
        lines.append(
            f"diffusers  decode {untiled:.3f} s, tiled {tiled:.3f} s: wanjax's is {untiled / result.vae_seconds:.2f}x as fast"
        )
    for label, steps, speedup in (
        ("eager", result.diffusers, result.speedup_over_diffusers),
        ("torch.compile", result.diffusers_compiled, result.speedup_over_compiled_diffusers),
    ):
        if steps is not None:
            compiled = f", compile {steps.compile_seconds:.1f} s" if steps.compile_seconds is not None else ""
            lines.append(
                f"diffusers  {steps.seconds_per_step:.4f} s/step on {result.diffusers_device}, {label}{compiled}, "
                f"attention {steps.attention}: wanjax is {speedup:.2f}x as fast"
            )
    return "\n".join(lines)


class StepProgress:
    """A progress bar over denoising steps that starts with the first step, after load and compile."""

    def __init__(self, *, disable: bool) -> None:
        self._disable = disable
        self._bar = None

    def __call__(self, done: int, total: int) -> None:
        if self._bar is None:
            from tqdm import tqdm

            self._bar = tqdm(total=total, desc="denoising", unit="step", disable=self._disable, file=sys.stderr)
        self._bar.update(done - self._bar.n)
        if done == total:
            self._bar.close()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


if __name__ == "__main__":
    sys.exit(run_to_exit(main))
