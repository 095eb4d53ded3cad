"""One causal 3x3x3 convolution of the Wan 2.1 decoder at its real widths and 832x480 sizes: torch's
`conv3d` against XLA's forms and compile options, interleaved in one process, CPU time.

Usage: python vae_conv_vs_torch.py SHAPES VARIANTS [ROUNDS]; SHAPES comma-separated of top (96
channels at 480x832), level2 (192 at 240x416), level1 (384 at 120x208), level0 (384 at 60x104),
each 2 output frames; VARIANTS comma-separated FORM[+OPTIONS], FORM `frames` (per time tap, 2-D
convolutions summed), `fold` (the taps' frames concatenated on channels, one 2-D convolution) or
`3d`, OPTIONS `noynn` (no YNNPACK), `onednn` or `xnn`. Prints each variant's error against torch,
best wall and CPU time, and CPU time over torch's.
"""

from __future__ import annotations

import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import torch

SHAPES = {"top": (2, 480, 832, 96), "level2": (2, 240, 416, 192), "level1": (2, 120, 208, 384),
          "level0": (2, 60, 104, 384)}  # fmt: skip
OPTIONS = {"": {}, "noynn": {"xla_cpu_experimental_ynn_fusion_type": ""}, "onednn": {"xla_cpu_use_onednn": True},
           "xnn": {"xla_cpu_use_xnnpack": True}}  # fmt: skip


def _conv2d(x: jax.Array, kernel: jax.Array) -> jax.Array:
    return jax.lax.conv_general_dilated(x, kernel, (1, 1), ((1, 1), (1, 1)), dimension_numbers=("NHWC", "HWIO", "NHWC"))


def by_frames(x: jax.Array, kernel: jax.Array) -> jax.Array:
    """x [T + 2, H, W, C], kernel [3, 3, 3, C, C] -> [T, H, W, C]: per tap, every frame it reads."""
    out = x.shape[0] - 2
    return sum(_conv2d(x[tap : tap + out], kernel[tap]) for tap in range(3))


def folded(x: jax.Array, kernel: jax.Array) -> jax.Array:
    out = x.shape[0] - 2
    stacked = jnp.concatenate([x[tap : tap + out] for tap in range(3)], axis=-1)
    return _conv2d(stacked, jnp.concatenate(list(kernel), axis=2))


def in_3d(x: jax.Array, kernel: jax.Array) -> jax.Array:
    numbers = ("NDHWC", "DHWIO", "NDHWC")
    padding = ((0, 0), (1, 1), (1, 1))
    return jax.lax.conv_general_dilated(x[None], kernel, (1, 1, 1), padding, dimension_numbers=numbers)[0]


FORMS = {"frames": by_frames, "fold": folded, "3d": in_3d}


def main(argv: list[str]) -> None:
    torch.set_num_threads(2)
    rounds = int(argv[2]) if len(argv) > 2 else 3
    for shape in argv[0].split(","):
        frames, height, width, channels = SHAPES[shape]
        rng = np.random.default_rng(0)
        x = rng.standard_normal((frames + 2, height, width, channels), np.float32)
        kernel = (rng.standard_normal((3, 3, 3, channels, channels)) / np.sqrt(27 * channels)).astype(np.float32)
        x_torch = torch.from_numpy(np.ascontiguousarray(x.transpose(3, 0, 1, 2))[None])  # [1, C, T, H, W]
        kernel_torch = torch.from_numpy(np.ascontiguousarray(kernel.transpose(4, 3, 0, 1, 2)))

        def torch_conv() -> np.ndarray:
            with torch.inference_mode():
                y = torch.nn.functional.conv3d(x_torch, kernel_torch, padding=(0, 1, 1))
            return y[0].permute(1, 2, 3, 0).numpy()

        expected = torch_conv()
        runs = {"torch": torch_conv}
        x_jax, kernel_jax = jax.device_put(x), jax.device_put(kernel)
        for variant in argv[1].split(","):
            form, _, option = variant.partition("+")
            compiled = jax.jit(FORMS[form]).lower(x_jax, kernel_jax).compile(OPTIONS[option])
            error = np.abs(np.asarray(compiled(x_jax, kernel_jax)) - expected).max() / np.abs(expected).max()
            print(f"{shape} {variant}: error {error:.1e} of the output's range", flush=True)
            runs[variant] = lambda compiled=compiled: compiled(x_jax, kernel_jax).block_until_ready()
        times = {name: [] for name in runs}
        for _ in range(rounds):
            for name, run in runs.items():
                wall, cpu = time.perf_counter(), time.process_time()
                run()
                times[name].append((time.perf_counter() - wall, time.process_time() - cpu))
        flop = 2 * 27 * channels**2 * frames * height * width
        torch_cpu = min(t[1] for t in times["torch"])
        for name, measured in times.items():
            cpu = min(t[1] for t in measured)
            wall = min(t[0] for t in measured)
            print(f"{shape} {name}: wall {wall * 1e3:.0f} ms, CPU {cpu * 1e3:.0f} ms ({flop / cpu / 1e9:.0f} GFLOP "
                  f"per CPU second), CPU over torch {cpu / torch_cpu:.2f}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1:])
