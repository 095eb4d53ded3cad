"""The real Wan VAEs' decode or encode peak, measured in this fresh process, beside the memory plan.

Usage: python vae_real_peak.py VAE MODE HEIGHT WIDTH FRAMES [KEY=VALUE ...]; VAE `2.1` or `2.2`
(the published architectures, random weights), MODE `decode` or `encode`, FRAMES in video frames,
KEY=VALUE any VAE config key (vae_tiling=true, vae_convolution=3d, vae_decode_chunk=2, ...).
Prints one JSON object (MiB): `measured`, the resident high-water mark of the run minus the
resident memory before it (Linux VmHWM reset through /proc/self/clear_refs after the weights,
the input, the compile and one warm-up run; freed heap returned first); `planned`, the plan's
term for it; `xla_temp` and `xla_output`, XLA's buffer assignment; `seconds`, the timed run.
"""

from __future__ import annotations

import ctypes
import json
import re
import sys
import time
from pathlib import Path

import numpy as np

from wanjax.application.builders import vae_runtime
from wanjax.application.presets import resolve_config
from wanjax.domain.architectures import WAN21_VAE, WAN22_VAE
from wanjax.domain.memory import vae_decode_bytes, vae_encode_bytes

MIB = 2**20


def _status_kib(field: str) -> int:
    return int(re.search(rf"{field}:\s+(\d+) kB", Path("/proc/self/status").read_text()).group(1))


def main(argv: list[str]) -> None:
    import jax
    from flax import nnx

    from wanjax.adapters.jax.bench import random_vae

    name, mode = argv[0], argv[1]
    height, width, frames = (int(v) for v in argv[2:5])
    overrides = dict(item.split("=", 1) for item in argv[5:])
    settings = resolve_config("demo", overrides, read_checkpoint=False).resolved("cpu").vae
    spec = {"2.1": WAN21_VAE, "2.2": WAN22_VAE}[name]
    vae = random_vae(spec, vae_runtime(settings))
    graphdef, params = nnx.split(vae)
    rng = np.random.default_rng(0)
    latent_frames = 1 + (frames - 1) // spec.temporal_compression
    if mode == "decode":
        s = spec.spatial_compression
        x = rng.standard_normal((1, latent_frames, height // s, width // s, spec.z_dim), dtype=np.float32)
        planned = vae_decode_bytes(
            spec, height * width, latent_frames, settings.decode_chunk, settings.tile, convolution=settings.convolution
        )
        run = lambda p, x: nnx.merge(graphdef, p).decode(x)
    else:
        x = rng.uniform(-1, 1, (1, frames, height, width, 3)).astype(np.float32)
        planned = vae_encode_bytes(spec, height * width, frames, settings.encode_chunk, settings.tile)
        run = lambda p, x: nnx.merge(graphdef, p).encode(x)
    x = jax.device_put(x)
    start = time.perf_counter()
    compiled = jax.jit(run).lower(params, x).compile()
    analysis = compiled.memory_analysis()
    print(f"compiled in {time.perf_counter() - start:.0f} s, XLA temp {analysis.temp_size_in_bytes / MIB:.0f} MiB", file=sys.stderr)
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
    before = _status_kib("VmRSS")
    start = time.perf_counter()
    compiled(params, x).block_until_ready()
    seconds = time.perf_counter() - start
    print(json.dumps({
        "vae": name, "mode": mode, "size": [height, width, frames], "settings": overrides,
        "measured": (_status_kib("VmHWM") - before) / 1024, "planned": planned / MIB,
        "xla_temp": analysis.temp_size_in_bytes / MIB, "xla_output": analysis.output_size_in_bytes / MIB,
        "seconds": round(seconds, 2),
    }))  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1:])
