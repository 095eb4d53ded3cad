"""`wanjax generate`: one video from a prompt, on a preset, a checkpoint folder or a hub id."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from wanjax.domain.errors import ConfigError, InvalidRequestError, WanjaxError

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
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="wanjax", description="Wan video generation in JAX.")
    commands = parser.add_subparsers(dest="command", required=True)
    gen = commands.add_parser("generate", help="generate a video per --prompt, in one batch")
    gen.add_argument("--model", help="preset name, checkpoint folder or Hugging Face repo id (default: demo)")
    gen.add_argument("--prompt", action="append", required=True,
                     help="repeatable: one video per prompt, all in one batch (video i uses seed + i)")
    gen.add_argument("--negative-prompt")
    gen.add_argument("--image", type=Path, help="first frame (png/jpg) for image-to-video models")
    gen.add_argument("--height", type=int)
    gen.add_argument("--width", type=int)
    gen.add_argument("--num-frames", type=int, help="4k+1 frames, e.g. 81")
    gen.add_argument("--steps", type=int, help="denoising steps")
    gen.add_argument("--guidance-scale", type=float, help="guidance (of the high-noise expert on Wan 2.2 A14B)")
    gen.add_argument("--guidance-scale-low", type=float, help="guidance of the low-noise expert (Wan 2.2 A14B)")
    gen.add_argument("--seed", type=int)
    gen.add_argument("--dtype", help="float32 | bfloat16 (default: bfloat16 on accelerators, float32 on CPU)")
    gen.add_argument("--lora", action="append", metavar="PATH[:SCALE]",
                     help="LoRA merged into the transformer (Wan 2.2 A14B: the high-noise expert); repeatable")
    gen.add_argument("--lora-low", action="append", metavar="PATH[:SCALE]",
                     help="LoRA merged into the low-noise expert of Wan 2.2 A14B models; repeatable")
    gen.add_argument("--out", type=Path, default=Path("output.mp4"), help=".mp4, or .npy for uint8 frames [B, F, H, W, 3]")
    gen.add_argument("--latents", type=Path, help=".npy initial noise [B, C, F', H', W'] (diffusers layout)")
    gen.add_argument("--output-type", choices=("video", "latent"), default="video", help="latent: final latents as .npy")
    gen.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="any config key; repeatable")
    gen.add_argument("--quiet", action="store_true", help="no progress bar or timing summary")
    group = gen.add_argument_group(
        "multi-process (one process per host; process 0 writes the output)",
        "Each setting is read from its flag, else from its environment variable. Give all three, or none "
        "for a single process. Every process runs the same command; the mesh (--set mesh_data=...) spans "
        "the devices of all of them.",
    )
    group.add_argument("--coordinator-address", metavar="HOST:PORT",
                       help="where process 0 serves the coordinator (else JAX_COORDINATOR_ADDRESS)")
    group.add_argument("--num-processes", type=int, help="how many processes (else JAX_NUM_PROCESSES)")
    group.add_argument("--process-id", type=int, help="this process's index, from 0 (else JAX_PROCESS_ID)")
    commands.add_parser("presets", help="list the presets")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # ours is the only progress bar
    try:
        if args.command == "presets":
            from wanjax.application.presets import preset_names

            print("\n".join(preset_names()))
            return 0
        return _generate(args)
    except WanjaxError as err:
        print(f"wanjax: error: {err}", file=sys.stderr)
        return 2


def _overrides(args: argparse.Namespace) -> dict[str, object]:
    overrides: dict[str, object] = {}
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set {item!r}: expected KEY=VALUE, e.g. --set scan_layers=false")
        overrides[key.strip()] = value
    for flag, key in FLAG_KEYS.items():
        value = getattr(args, flag)
        if value is not None:
            overrides[key] = value
    return overrides


def _read_latents(path: Path) -> np.ndarray:
    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError) as err:
        raise InvalidRequestError(f"--latents {path}: cannot read a .npy array ({err})") from None


def _join_process_group(args: argparse.Namespace) -> None:
    """A multi-process run joins its group before anything else touches JAX; one process does nothing."""
    from wanjax.adapters.jax.distributed import initialize, process_group

    group = process_group(
        os.environ,
        coordinator_address=args.coordinator_address,
        num_processes=args.num_processes,
        process_id=args.process_id,
    )
    if group is not None:
        initialize(group)


def _generate(args: argparse.Namespace) -> int:
    _join_process_group(args)
    from wanjax.adapters.jax.distributed import is_primary
    from wanjax.adapters.media.images import read_image
    from wanjax.application.caches import configure_compilation_cache
    from wanjax.application.container import build_container
    from wanjax.application.outputs import (
        calibration_path,
        check_output_path,
        output_paths,
        write_calibration,
        write_output,
    )
    from wanjax.application.presets import resolve_config

    config = resolve_config(args.model, _overrides(args))
    configure_compilation_cache(config.compilation_cache_dir)  # process-global: this process is ours
    image = read_image(args.image) if args.image is not None else None
    requests = [config.request(prompt, image=image, seed=config.seed + i) for i, prompt in enumerate(args.prompt)]
    request = requests[0]
    output_type = "latent" if args.output_type == "latent" else "frames"
    check_output_path(args.out, output_type)
    latents = _read_latents(args.latents) if args.latents else None

    service = build_container(config).service()
    service.geometry(request)
    warmup = service.warmup(requests, initial_latents=latents, output_type=output_type) if config.warmup else None
    progress = StepProgress(disable=args.quiet)
    try:
        result = service.generate_batch(requests, initial_latents=latents, output_type=output_type, on_step=progress)
    finally:
        progress.close()
    if warmup is not None:  # the load happened in the warm-up; the rest of it is one line
        load = warmup.seconds.pop("load", 0.0)
        result.trace.add("load", load)
        result.trace.add("warmup", sum(warmup.seconds.values()))
    if not is_primary():
        print(f"wanjax: not process 0: skipped writing {args.out} (process 0 writes it)", file=sys.stderr)
        return 0
    written = output_paths(args.out, len(result.array))
    write_output(result.array, args.out, config.fps)
    if result.calibration is not None:
        written.append(calibration_path(args.out))
        title = f"{config.model}, {config.dtype}, {request.num_inference_steps} steps, flow_shift {request.flow_shift}"
        write_calibration(result.calibration, written[-1], title)
    if not args.quiet:
        print(result.trace.summary())
        if request.cache.policy != "none":
            report = result.cache_report
            print(f"cache_policy={request.cache.policy}: {report.steps_skipped} of {report.num_steps} steps skipped")
    print("\n".join(f"wrote {path}" for path in written))
    return 0


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
    sys.exit(main())
