"""The Wan 2.1 VAE's decode, wanjax beside diffusers' `AutoencoderKLWan.decode`, interleaved in one process.

Usage: python vae_vs_diffusers.py HEIGHT WIDTH FRAMES ROUNDS [VARIANT ...]

The published Wan 2.1 VAE architecture with diffusers' random initialisation (torch seed 0), the
same weights loaded into wanjax, the same random latents. Each round decodes with diffusers, then
with every VARIANT in turn; each decode prints its wall and CPU (user + sys of this process)
seconds and the load average, and the end prints per-round ratios to diffusers: under a shared
CPU the ratio of one round is the figure to quote, the CPU-time one the steadier.

A VARIANT is `NAME:ITEMS`, ITEMS comma-separated: `KEY=VALUE` a VAE config key as on the command
line (`vae_convolution=3d`, `vae_decode_chunk=2`), `+OPTION=VALUE` an XLA compile option over the
project's own (`xla_options`: on CPU, no YNNPACK), `xla_defaults` XLA's defaults instead of the
project's options (YNNPACK's convolutions on CPU), and a first item `@DIR` traces the convolution
and upsample code (`CausalConv3d`, `Upsample`) of another checkout's adapters/jax/vae instead of
this one's (its weight layout must be this one's), to time a change against its base in one run.
Default: one variant `wanjax:` (what wanjax compiles). XLA runs at its default optimisation level
(this is no pytest run, so tests/conftest.py's XLA_FLAGS do not apply; any set outside are printed).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np


def _checkout_module(checkout: Path, name: str) -> object:
    spec = importlib.util.spec_from_file_location(f"checkout_{name}", checkout / f"adapters/jax/vae/{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@contextlib.contextmanager
def _traced_from(checkout: Path | None) -> Iterator[None]:
    """While tracing: `checkout`'s CausalConv3d and Upsample methods in place of this tree's."""
    if checkout is None:
        yield
        return
    from wanjax.adapters.jax.vae import blocks, layers

    other_layers, other_blocks = _checkout_module(checkout, "layers"), _checkout_module(checkout, "blocks")
    swaps = [(layers.CausalConv3d, other_layers.CausalConv3d, "__call__"),
             (layers.CausalConv3d, other_layers.CausalConv3d, "stream"),
             (blocks.Upsample, other_blocks.Upsample, "__call__")]  # fmt: skip
    saved = [getattr(ours, name) for ours, _, name in swaps]
    for ours, theirs, name in swaps:
        setattr(ours, name, getattr(theirs, name))
    try:
        yield
    finally:
        for (ours, _, name), method in zip(swaps, saved):
            setattr(ours, name, method)


def _parse(variant: str) -> tuple[str, Path | None, dict[str, str], dict[str, str]]:
    from wanjax.adapters.jax.platform.compiled import xla_options

    name, _, text = variant.partition(":")
    items = [item for item in text.split(",") if item]
    checkout = Path(items.pop(0)[1:]) if items and items[0].startswith("@") else None
    overrides, options = {}, ({} if "xla_defaults" in items else xla_options())
    for item in (item for item in items if item != "xla_defaults"):
        key, value = item.split("=", 1)
        (options if key.startswith("+") else overrides)[key.lstrip("+")] = value
    return name, checkout, overrides, options


def _wanjax_decode(variant: str, tensors: dict[str, np.ndarray], latents: np.ndarray) -> tuple[str, Callable]:
    import jax
    from flax import nnx

    from wanjax.adapters.jax.vae.weights import load_vae
    from wanjax.application.builders import vae_runtime
    from wanjax.application.presets import resolve_config
    from wanjax.domain.architectures import WAN21_VAE

    name, checkout, overrides, options = _parse(variant)
    settings = resolve_config("demo", overrides, read_checkpoint=False).resolved("cpu").vae
    graphdef, params = nnx.split(load_vae(WAN21_VAE, vae_runtime(settings), tensors))
    x = jax.device_put(latents)
    start = time.perf_counter()
    with _traced_from(checkout):
        compiled = jax.jit(lambda p, x: nnx.merge(graphdef, p).decode(x)).lower(params, x).compile(options)
    print(f"{name}: {settings.convolution}, chunk {settings.decode_chunk}, code {checkout or 'this tree'}, "
          f"options {options}: compiled in {time.perf_counter() - start:.1f} s, XLA temp "
          f"{compiled.memory_analysis().temp_size_in_bytes / 2**20:.0f} MiB", flush=True)  # fmt: skip
    return name, lambda: np.asarray(compiled(params, x))[0]


def main(argv: list[str]) -> None:
    import torch
    from diffusers import AutoencoderKLWan

    from wanjax.adapters.torch.diffusers_bench import diffusers_config
    from wanjax.domain.architectures import WAN21_VAE

    height, width, frames, rounds = (int(v) for v in argv[:4])
    torch.set_num_threads(len(os.sched_getaffinity(0)))
    print(f"torch threads {torch.get_num_threads()}, XLA_FLAGS {os.environ.get('XLA_FLAGS')!r}", flush=True)
    torch.manual_seed(0)
    reference = AutoencoderKLWan(**diffusers_config(WAN21_VAE)).eval()
    tensors = {name: tensor.numpy() for name, tensor in reference.state_dict().items()}
    latent_shape = (1, 1 + (frames - 1) // 4, height // 8, width // 8, WAN21_VAE.z_dim)  # [B, F', H', W', C]
    latents = np.random.default_rng(0).standard_normal(latent_shape, np.float32)
    torch_latents = torch.from_numpy(np.ascontiguousarray(latents.transpose(0, 4, 1, 2, 3)))

    def diffusers_decode() -> np.ndarray:
        with torch.inference_mode():
            return reference.decode(torch_latents).sample[0].permute(1, 2, 3, 0).numpy()  # [F, H, W, 3]

    runs = {"diffusers": diffusers_decode}
    runs.update(_wanjax_decode(variant, tensors, latents) for variant in argv[4:] or ["wanjax:"])
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in runs}
    firsts = {}
    for round_ in range(rounds):
        for name, decode in runs.items():
            wall, cpu = time.perf_counter(), time.process_time()
            video = decode()
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            times[name].append((wall, cpu))
            firsts.setdefault(name, video)
            print(json.dumps({"round": round_, "name": name, "wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
                              "load": round(os.getloadavg()[0], 1)}), flush=True)  # fmt: skip
    expected = firsts["diffusers"]
    for name, video in firsts.items():
        if name != "diffusers":
            print(f"{name}: max |wanjax - diffusers| {np.abs(video - expected).max():.2e}", flush=True)
    for kind, index in (("wall", 0), ("cpu", 1)):
        for name, measured in times.items():
            ratios = [m[index] / d[index] for m, d in zip(measured, times["diffusers"])]
            print(f"{kind} {name}: {[round(m[index], 1) for m in measured]} s, over diffusers "
                  f"{[round(r, 3) for r in ratios]}")  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1:])
