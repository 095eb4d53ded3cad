"""The VAE's causal 3x3x3 convolution in its two forms (`vae_convolution`): one 3-D
convolution, or a 2-D convolution of every frame per time tap, summed.

Skipped by default; run with
    .venv/bin/pytest tests/benchmarks/test_vae_convolution_bench.py --benchmark-only -s
Shapes [frames + 2 of causal context, H, W, C -> C]: the demo VAE's decoder at 192x128
(4 frames of a chunk) and a 384-wide level of the released Wan 2.1 VAE at 832x480 (1/8
of the pixels, 2 frames), and torch's `conv3d` (2 threads) on the same shapes as the
reference. Grouped by shape, so pytest-benchmark's table sets them side by side.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from flax import nnx

from wanjax.adapters.jax.vae.layers import CausalConv3d
from wanjax.adapters.jax.vae.runtime import VaeRuntime

SHAPES = {  # (frames, H, W, channels)
    "demo-full-res": (4, 128, 192, 16),
    "demo-half-res": (4, 64, 96, 32),
    "wan21-quarter-res": (2, 120, 208, 96),
    "wan21-eighth-res": (2, 60, 104, 384),
}
FORMS = ("3d", "frames")


def flops(frames: int, height: int, width: int, channels: int) -> int:
    return 2 * 27 * channels * channels * frames * height * width


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("form", FORMS)
def test_vae_convolution(benchmark, shape: str, form: str) -> None:
    frames, height, width, channels = SHAPES[shape]
    conv = CausalConv3d(channels, channels, (3, 3, 3), VaeRuntime(convolution=form), padding=(1, 1, 1),
                        rngs=nnx.Rngs(0))  # fmt: skip
    x = jax.random.normal(jax.random.key(0), (1, frames + 2, height, width, channels), jnp.float32)
    benchmark.group = shape
    run = nnx.jit(lambda conv, x: conv(x))
    run(conv, x).block_until_ready()  # compile and warm up outside the timing
    benchmark.pedantic(lambda: run(conv, x).block_until_ready(), rounds=5, iterations=1)
    seconds = benchmark.stats.stats.min
    print(f"\n{shape} {form}: {seconds * 1e3:.1f} ms, {flops(*SHAPES[shape]) / seconds / 1e9:.1f} GFLOP/s")


@pytest.mark.parametrize("shape", list(SHAPES))
def test_torch_conv3d(benchmark, shape: str) -> None:
    frames, height, width, channels = SHAPES[shape]
    torch.set_num_threads(2)
    generator = np.random.default_rng(0)
    x = torch.from_numpy(generator.standard_normal((1, channels, frames + 2, height, width), np.float32))
    kernel = torch.from_numpy(generator.standard_normal((channels, channels, 3, 3, 3), np.float32))
    benchmark.group = shape

    def run() -> None:
        with torch.inference_mode():
            torch.nn.functional.conv3d(x, kernel, padding=(0, 1, 1))

    run()
    benchmark.pedantic(run, rounds=5, iterations=1)
    seconds = benchmark.stats.stats.min
    print(f"\n{shape} torch: {seconds * 1e3:.1f} ms, {flops(*SHAPES[shape]) / seconds / 1e9:.1f} GFLOP/s")
