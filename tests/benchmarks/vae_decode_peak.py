"""Peak memory of one VAE decode, measured in a fresh process (run by test_vae_decode_bench.py).

Usage: python vae_decode_peak.py FOLDER IMPL LATENT_FRAMES HEIGHT WIDTH, IMPL one of
`diffusers`, `wanjax` (unrolled) or `wanjax-scanN` (decode_chunk N). Prints one JSON
object: `peak_mib`, the resident-memory high-water mark during the decode minus the
resident memory just before it (Linux `VmHWM`, reset through /proc/self/clear_refs
after loading, compiling and one warm-up decode, with freed heap returned to the OS
first), and for wanjax `xla_temp_mib`, XLA's own figure for the program's temporaries.
Each implementation imports only its own framework.
"""

from __future__ import annotations

import ctypes
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np


def _status_kib(field: str) -> int:
    return int(re.search(rf"{field}:\s+(\d+) kB", Path("/proc/self/status").read_text()).group(1))


def _peak_mib(run: Callable[[], None]) -> float:
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current VmRSS
    before = _status_kib("VmRSS")
    run()
    return (_status_kib("VmHWM") - before) / 1024


def _latents(frames: int, height: int, width: int, z_dim: int) -> np.ndarray:
    return np.random.default_rng(0).standard_normal((1, z_dim, frames, height, width), dtype=np.float32)


def _diffusers(folder: Path, frames: int, height: int, width: int) -> dict[str, float]:
    import torch
    from diffusers import AutoencoderKLWan

    torch.set_num_threads(2)
    vae = AutoencoderKLWan.from_pretrained(folder).eval()
    z = torch.from_numpy(_latents(frames, height, width, vae.config.z_dim))

    def run() -> None:
        with torch.no_grad():
            vae.decode(z)

    run()
    return {"peak_mib": _peak_mib(run)}


def _wanjax(folder: Path, chunk: int | None, frames: int, height: int, width: int) -> dict[str, float]:
    import jax
    from flax import nnx
    from safetensors.numpy import load_file

    from wanjax.adapters.jax.vae.runtime import VaeRuntime
    from wanjax.adapters.jax.vae.weights import load_vae
    from wanjax.domain.specs import VaeSpec

    spec = VaeSpec.from_diffusers_config(json.loads((folder / "config.json").read_text()))
    tensors = load_file(folder / "diffusion_pytorch_model.safetensors")
    graphdef, params = nnx.split(load_vae(spec, VaeRuntime(decode_chunk=chunk), tensors))
    z = jax.numpy.asarray(_latents(frames, height, width, spec.z_dim).transpose(0, 2, 3, 4, 1))
    compiled = jax.jit(lambda p, z: nnx.merge(graphdef, p).decode(z)).lower(params, z).compile()

    def run() -> None:
        compiled(params, z).block_until_ready()

    run()
    return {"peak_mib": _peak_mib(run), "xla_temp_mib": compiled.memory_analysis().temp_size_in_bytes / 2**20}


def main(argv: list[str]) -> None:
    folder, impl = Path(argv[0]), argv[1]
    frames, height, width = (int(v) for v in argv[2:5])
    if impl == "diffusers":
        result = _diffusers(folder, frames, height, width)
    else:
        chunk = int(impl.removeprefix("wanjax-scan")) if impl.startswith("wanjax-scan") else None
        result = _wanjax(folder, chunk, frames, height, width)
    print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1:])
