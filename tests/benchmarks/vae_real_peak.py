"""The real Wan VAEs' decode or encode peak, measured in this fresh process, beside the memory plan.

Usage: python vae_real_peak.py VAE MODE HEIGHT WIDTH FRAMES [KEY=VALUE ...]; VAE `2.1` or `2.2`
(the published architectures, random weights), MODE `decode` or `encode`, FRAMES in video frames,
KEY=VALUE any VAE config key (vae_tiling=true, vae_convolution=3d, vae_decode_chunk=2, ...); the
other settings are the preset's on this platform (`auto` dtype and convolution: float32 and `frames`
on CPU, bfloat16 and `3d` on a GPU). Prints one JSON object (MiB): `measured`, on CPU the resident
high-water mark of the run minus the resident memory before it (Linux VmHWM reset through
/proc/self/clear_refs after the weights, the input and the compile; freed heap returned first), on
an accelerator the device's peak_bytes_in_use after the run minus its bytes_in_use before (None
where the compile's autotuning, not the run, set the peak); `planned`, the plan's term for it;
`xla_temp` and `xla_output`, XLA's buffer assignment (compiled with wanjax's `xla_options`);
`seconds`, the run.
"""

from __future__ import annotations

import ctypes
import json
import re
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from wanjax.application.builders import vae_runtime
from wanjax.application.presets import resolve_config
from wanjax.domain.architectures import WAN21_VAE, WAN22_VAE
from wanjax.domain.vae_memory import vae_decode_bytes, vae_encode_bytes

MIB = 2**20


def _mib(size: int | None) -> float | None:
    return None if size is None else size / MIB


def _status_kib(field: str) -> int:
    return int(re.search(rf"{field}:\s+(\d+) kB", Path("/proc/self/status").read_text()).group(1))


@contextmanager
def _resident_growth() -> Iterator[dict]:
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
    before = _status_kib("VmRSS")
    found = {"as": "resident (VmHWM - VmRSS before)"}
    yield found
    found["bytes"] = (_status_kib("VmHWM") - before) * 1024


@contextmanager
def _device_growth() -> Iterator[dict]:
    import jax

    device = jax.devices()[0]
    before = device.memory_stats()
    found = {"as": "device (peak_bytes_in_use - bytes_in_use before)"}
    yield found
    peak = device.memory_stats()["peak_bytes_in_use"]
    found["peak_before_run"] = before["peak_bytes_in_use"]
    found["bytes"] = peak - before["bytes_in_use"] if peak > before["peak_bytes_in_use"] else None


def main(argv: list[str]) -> None:
    import jax
    from flax import nnx

    from wanjax.adapters.jax.bench import random_vae
    from wanjax.adapters.jax.platform.compiled import xla_options

    name, mode = argv[0], argv[1]
    height, width, frames = (int(v) for v in argv[2:5])
    overrides = dict(item.split("=", 1) for item in argv[5:])
    platform = jax.default_backend()
    preset = {"2.1": "wan2.1-t2v-1.3b", "2.2": "wan2.2-ti2v-5b"}[name]
    settings = resolve_config(preset, overrides, read_checkpoint=False).resolved(platform).vae
    spec = {"2.1": WAN21_VAE, "2.2": WAN22_VAE}[name]
    vae = random_vae(spec, vae_runtime(settings))
    graphdef, params = nnx.split(vae)
    rng = np.random.default_rng(0)
    latent_frames = 1 + (frames - 1) // spec.temporal_compression
    if mode == "decode":
        s = spec.spatial_compression
        x = rng.standard_normal((1, latent_frames, height // s, width // s, spec.z_dim), dtype=np.float32)
        planned = vae_decode_bytes(
            spec, height * width, latent_frames, settings.decode_chunk, settings.tile,
            convolution=settings.convolution, dtype=settings.dtype, platform=platform,
        )  # fmt: skip
        run = lambda p, x: nnx.merge(graphdef, p).decode(x)
    else:
        x = rng.uniform(-1, 1, (1, frames, height, width, 3)).astype(np.float32)
        planned = vae_encode_bytes(
            spec, height * width, frames, settings.encode_chunk, settings.tile, dtype=settings.dtype, platform=platform
        )
        run = lambda p, x: nnx.merge(graphdef, p).encode(x)
    x = jax.device_put(x)
    start = time.perf_counter()
    compiled = jax.jit(run).lower(params, x).compile(xla_options())
    analysis = compiled.memory_analysis()
    print(f"compiled in {time.perf_counter() - start:.0f} s, XLA temp {analysis.temp_size_in_bytes / MIB:.0f} MiB", file=sys.stderr)
    measure = _resident_growth if platform == "cpu" else _device_growth
    with measure() as measured:
        start = time.perf_counter()
        compiled(params, x).block_until_ready()
        seconds = time.perf_counter() - start
    print(json.dumps({
        "vae": name, "mode": mode, "size": [height, width, frames], "settings": overrides,
        "platform": platform, "device": jax.devices()[0].device_kind, "dtype": settings.dtype,
        "convolution": settings.convolution,
        "measured": _mib(measured["bytes"]), "measured_as": measured["as"],
        "device_peak_before_run": _mib(measured.get("peak_before_run")),
        "planned": planned / MIB,
        "xla_temp": analysis.temp_size_in_bytes / MIB, "xla_output": analysis.output_size_in_bytes / MIB,
        "seconds": round(seconds, 2),
    }))  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1:])
