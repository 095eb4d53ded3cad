"""One start-up measurement in a fresh process (run by test_load_bench.py).

Usage: python load_probe.py MODE FOLDER [CACHE_DIR]
  load     load the transformer in FOLDER to bf16: seconds, resident-memory peak
  cached   the same through the converted-weights cache in CACHE_DIR (the first run converts
           and saves, a second one restores)
  compile  load, then compile and run one denoising step of the real-shape model on a small
           latent, with JAX's persistent compilation cache in CACHE_DIR: compile seconds
Prints one JSON object. Memory: `peak_gib` is the high-water mark of resident memory
(Linux VmHWM) during the load minus the resident memory just before it (after imports),
`final_gib` what stays resident after it, `weights_gib` the loaded parameters' bytes.
"""

from __future__ import annotations

import ctypes
import json
import re
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from wanjax.adapters.checkpoints.weights import ComponentWeights
from wanjax.adapters.jax.transformer.experts import ExpertLoading
from wanjax.adapters.jax.transformer.runtime import TransformerRuntime
from wanjax.adapters.jax.loading.weights_cache import ConvertedWeightsCache
from wanjax.domain.specs import TransformerSpec

GIB = 2**30


def _status_bytes(field: str) -> int:
    return 1024 * int(re.search(rf"{field}:\s+(\d+) kB", Path("/proc/self/status").read_text()).group(1))


def _load(folder: Path, cache_dir: str | None) -> tuple[object, dict[str, float]]:
    spec = TransformerSpec.from_diffusers_config(json.loads((folder / "config.json").read_text()))
    cache = ConvertedWeightsCache(Path(cache_dir)) if cache_dir else None
    loading = ExpertLoading(runtime=TransformerRuntime(dtype=jnp.bfloat16, param_dtype=jnp.bfloat16), cache=cache)
    weights = ComponentWeights(folder)
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current VmRSS
    before = _status_bytes("VmRSS")
    start = time.perf_counter()
    model = loading.load(spec, weights)
    jax.block_until_ready(jax.tree.leaves(model))
    seconds = time.perf_counter() - start
    nbytes = sum(leaf.nbytes for leaf in jax.tree.leaves(model) if hasattr(leaf, "nbytes"))
    return model, {
        "seconds": seconds,
        "peak_gib": (_status_bytes("VmHWM") - before) / GIB,
        "final_gib": (_status_bytes("VmRSS") - before) / GIB,
        "weights_gib": nbytes / GIB,
    }


def _compile(folder: Path, cache_dir: str) -> dict[str, float]:
    from wanjax.application.caches import configure_compilation_cache

    configure_compilation_cache(cache_dir)
    compiled = {"seconds": 0.0, "executables": 0, "cache_hits": 0}

    def on_compile(event: str, duration: float, **kwargs: object) -> None:
        if event == "/jax/core/compile/backend_compile_duration":
            compiled["seconds"] += duration
            compiled["executables"] += 1

    def on_event(event: str, **kwargs: object) -> None:
        if event == "/jax/compilation_cache/cache_hits":
            compiled["cache_hits"] += 1

    from wanjax.adapters.jax.denoising.denoiser import JaxDenoiser
    from wanjax.domain.plan import plan_sampling
    from wanjax.domain.requests import GenerationRequest

    model, _ = _load(folder, None)
    jax.monitoring.register_event_duration_secs_listener(on_compile)
    jax.monitoring.register_event_listener(on_event)
    start = time.perf_counter()
    denoiser = JaxDenoiser([model])
    request = GenerationRequest(prompt="x", height=32, width=32, num_frames=1, num_inference_steps=1,
                                guidance_scale=5.0, flow_shift=3.0)  # fmt: skip
    context = np.random.default_rng(0).standard_normal((1, 512, 4096), dtype=np.float32)
    latents = denoiser.noise(0, (1, 1, 4, 4, 16))
    plan = plan_sampling(request)
    session = denoiser.session(plan, context, context)
    session.prepare(latents)
    jax.block_until_ready(session.denoise(latents).latents)
    return {**compiled, "wall_seconds": time.perf_counter() - start}


def main(mode: str, folder: str, cache_dir: str | None = None) -> None:
    if mode == "compile":
        result = _compile(Path(folder), cache_dir)
    else:
        _, result = _load(Path(folder), cache_dir if mode == "cached" else None)
    print(json.dumps(result))


if __name__ == "__main__":
    main(*sys.argv[1:])
