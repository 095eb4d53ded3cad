"""VAE decode time per frame and peak memory against frame count: wanjax (unrolled, scanned) vs diffusers.

Run: .venv/bin/pytest tests/benchmarks/test_vae_decode_bench.py --benchmark-only
A markdown table (the one in docs/performance.md) is printed at the end. Timing runs
here, every implementation on the same weights in one process; peak memory runs in a
fresh process per case (see vae_decode_peak.py), since a process's high-water mark
cannot be attributed to one call otherwise.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import jax
import numpy as np
import pytest
import torch
from diffusers import AutoencoderKLWan
from flax import nnx
from safetensors.numpy import load_file

from wanjax.adapters.jax.vae.runtime import VaeRuntime
from wanjax.adapters.jax.vae.weights import load_vae
from wanjax.domain.specs import VaeSpec

FRAMES = (5, 9, 17, 33)
IMPLS = ("diffusers", "wanjax", "wanjax-scan1", "wanjax-scan4")
LATENT_HW = (8, 8)  # 64 x 64 pixels
# The Wan 2.1 layout (dim_mult [1, 2, 4, 4], 2 residual blocks) at a third of its width.
MID_SIZE = dict(base_dim=32, z_dim=16)
PEAK_SCRIPT = Path(__file__).with_name("vae_decode_peak.py")
COLUMNS = ("compile_s", "ms_per_frame", "peak_mib", "xla_temp_mib")


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("vae_bench")
    torch.manual_seed(0)
    AutoencoderKLWan(**MID_SIZE).save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def table(request: pytest.FixtureRequest) -> Iterator[dict[tuple[int, str], dict[str, float]]]:
    rows: dict[tuple[int, str], dict[str, float]] = {}
    yield rows
    header = "frames | implementation | compile (s) | decode (ms / frame) | decode peak RSS (MiB) | XLA temps (MiB)"
    lines = [f"| {header} |", "| ---: | --- | ---: | ---: | ---: | ---: |"]
    for (frames, impl), row in sorted(rows.items()):
        cells = [f"{row[key]:.1f}" if key in row else "-" for key in COLUMNS]
        lines.append(f"| {frames} | {impl} | " + " | ".join(cells) + " |")
    with request.config.pluginmanager.getplugin("capturemanager").global_and_fixture_disabled():
        print("\n" + "\n".join(lines))


def _latents(frames: int, z_dim: int) -> np.ndarray:
    return np.random.default_rng(0).standard_normal((1, z_dim, frames, *LATENT_HW), dtype=np.float32)


def _prepare(impl: str, folder: Path, latent_frames: int) -> tuple[Callable[[], object], float | None]:
    """A no-argument decode of `latent_frames` latents, and its compile time (None for torch)."""
    if impl == "diffusers":
        torch.set_num_threads(2)
        ref = AutoencoderKLWan.from_pretrained(folder).eval()
        z = torch.from_numpy(_latents(latent_frames, ref.config.z_dim))
        return lambda: torch.no_grad()(ref.decode)(z), None
    chunk = int(impl.removeprefix("wanjax-scan")) if impl.startswith("wanjax-scan") else None
    spec = VaeSpec.from_diffusers_config(json.loads((folder / "config.json").read_text()))
    vae = load_vae(spec, VaeRuntime(decode_chunk=chunk), load_file(folder / "diffusion_pytorch_model.safetensors"))
    graphdef, params = nnx.split(vae)
    z = jax.numpy.asarray(_latents(latent_frames, spec.z_dim).transpose(0, 2, 3, 4, 1))
    start = time.perf_counter()
    compiled = jax.jit(lambda p, z: nnx.merge(graphdef, p).decode(z)).lower(params, z).compile()
    compile_s = time.perf_counter() - start
    return lambda: compiled(params, z).block_until_ready(), compile_s


def _peak(impl: str, folder: Path, latent_frames: int) -> dict[str, float]:
    args = [sys.executable, str(PEAK_SCRIPT), str(folder), impl, str(latent_frames), *map(str, LATENT_HW)]
    done = subprocess.run(args, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("frames", FRAMES)
@pytest.mark.parametrize("impl", IMPLS)
def test_vae_decode(benchmark, checkpoint: Path, table: dict, impl: str, frames: int) -> None:
    latent_frames = (frames - 1) // 4 + 1
    run, compile_s = _prepare(impl, checkpoint, latent_frames)
    benchmark.group = f"VAE decode {frames} frames at {8 * LATENT_HW[0]}x{8 * LATENT_HW[1]}"
    benchmark.pedantic(run, rounds=5, warmup_rounds=1, iterations=1)
    # The best round: on a CPU shared with other jobs, the least disturbed one.
    row = {"ms_per_frame": 1000 * benchmark.stats.stats.min / frames, **_peak(impl, checkpoint, latent_frames)}
    if compile_s is not None:
        row["compile_s"] = compile_s
    benchmark.extra_info.update(row)
    table[frames, impl] = row
