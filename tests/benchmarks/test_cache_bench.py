"""Cache policies: steps skipped, wall-time speed-up over the dense run measured in the same test,
and the PSNR of the decoded frames against the dense run's (both decoded by the demo model's VAE).

Skipped by default (`--benchmark-skip` in pyproject); run with
    .venv/bin/pytest tests/benchmarks/test_cache_bench.py --benchmark-only -s
Each policy runs with its published defaults (`--set cache_policy=...`), borrowing the Wan 2.1
1.3B calibration (MagCache curve, TeaCache polynomial) as the demo preset does; the weights are
random, so the skip counts show what the schedules and rules do, not what a trained model's
quality would be. Both runs use the Python loop, fp32, the KV cache, classifier-free guidance.
"""

from __future__ import annotations

import functools
import time

import attrs
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from wanjax.adapters.demo.checkpoint import DEMO_TRANSFORMER
from wanjax.adapters.jax.denoising.denoiser import JaxDenoiser
from wanjax.adapters.jax.transformer.model import WanTransformer
from wanjax.adapters.jax.transformer.runtime import TransformerRuntime
from wanjax.domain.config import GenerationConfig
from wanjax.domain.plan import SamplingPlan, plan_sampling
from wanjax.domain.ports import Denoised
from wanjax.domain.specs import TransformerSpec

WAN21_1_3B = TransformerSpec(num_attention_heads=12, attention_head_dim=128, ffn_dim=8960, num_layers=30, freq_dim=256)
POLICIES = ("magcache", "teacache", "cfg_cache", "sencache")


@attrs.frozen
class Setup:
    spec: TransformerSpec
    size: tuple[int, int, int]  # height, width, frames
    latents: tuple[int, int, int, int, int]  # [1, F', H', W', C]
    text_tokens: int
    steps: int
    rounds: int


SETUPS = {
    "demo": Setup(DEMO_TRANSFORMER, (128, 192, 17), (1, 5, 16, 24, 16), 64, 30, 3),
    # the 1.3B width, 2 of its 30 layers, 128x128, 9 frames
    "1.3b-arch-2-layers": Setup(attrs.evolve(WAN21_1_3B, num_layers=2), (128, 128, 9), (1, 3, 16, 16, 16), 128, 30, 2),
}


@functools.cache
def _autoencoder(cache_folder: str):
    """The demo checkpoint's VAE (latent channels 16, as both setups), loaded once."""
    from wanjax.application.container import build_container
    from wanjax.application.presets import resolve_config

    return build_container(resolve_config("demo", {"dtype": "float32"})).service().load().autoencoder


@functools.cache
def _denoiser(name: str) -> tuple[JaxDenoiser, np.ndarray, np.ndarray]:
    setup = SETUPS[name]
    runtime = TransformerRuntime(dtype=jnp.float32, param_dtype=jnp.float32)
    denoiser = JaxDenoiser([WanTransformer(setup.spec, runtime, rngs=nnx.Rngs(0))])
    rng = np.random.default_rng(0)
    latents = rng.standard_normal(setup.latents, dtype=np.float32)
    contexts = rng.standard_normal((2, setup.text_tokens, setup.spec.text_dim), dtype=np.float32)
    return denoiser, latents, contexts


def _plan(setup: Setup, policy: str) -> SamplingPlan:
    config = GenerationConfig().with_overrides({"cache_policy": policy, "cache_model": "wan2.1-t2v-1.3b"})
    height, width, frames = setup.size
    request = config.request("p", height=height, width=width, num_frames=frames,
                             num_inference_steps=setup.steps, guidance_scale=5.0, flow_shift=3.0)  # fmt: skip
    return plan_sampling(request)


def _timed(run, rounds: int) -> tuple[float, Denoised]:
    best, out = float("inf"), None
    for _ in range(rounds):
        start = time.perf_counter()
        out = run()
        jax.block_until_ready(out.latents)
        best = min(best, time.perf_counter() - start)
    return best, out


def _psnr(got: np.ndarray, reference: np.ndarray) -> float:
    """Peak signal-to-noise ratio in dB of uint8 frames (peak 255)."""
    mse = float(np.mean((got - reference) ** 2))
    return float("inf") if mse == 0 else 10 * np.log10(255.0**2 / mse)


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("name", list(SETUPS))
def test_cache_policy_speed_and_fidelity(benchmark, name, policy, demo_cache, monkeypatch):
    monkeypatch.setenv("WANJAX_CACHE", str(demo_cache.parent))
    setup = SETUPS[name]
    denoiser, latents, contexts = _denoiser(name)
    context, negative = contexts[:1], contexts[1:]
    dense_plan, plan = _plan(setup, "none"), _plan(setup, policy)
    for p in (dense_plan, plan):
        denoiser.session(p, context, negative).prepare(latents)
    run = lambda p: denoiser.session(p, context, negative).denoise(latents)  # noqa: E731
    dense_seconds, dense_run = _timed(lambda: run(dense_plan), setup.rounds)
    seconds, cached_run = _timed(lambda: run(plan), setup.rounds)
    dense, cached, report = dense_run.latents, cached_run.latents, cached_run.cache_report
    benchmark.pedantic(lambda: jax.block_until_ready(run(plan).latents), rounds=1)
    skipped = int((~(report.blocks_ran & report.unconditional_ran)).sum())
    unconditional_skipped = int((report.blocks_ran & ~report.unconditional_ran).sum())
    autoencoder = _autoencoder(str(demo_cache))
    frames, dense_frames = (autoencoder.decode_to_uint8(x).astype(np.float32) for x in (cached, dense))
    psnr = _psnr(frames, dense_frames)
    benchmark.extra_info.update(
        skipped_steps=skipped, steps=setup.steps, dense_s=dense_seconds, cached_s=seconds,
        speedup=dense_seconds / seconds, psnr_db=psnr,
    )  # fmt: skip
    print(
        f"\n{name} {policy}: {skipped}/{setup.steps} steps skip work ({unconditional_skipped} of them the "
        f"unconditional pass only); dense {dense_seconds:.2f} s, cached {seconds:.2f} s, "
        f"speed-up {dense_seconds / seconds:.2f}x; frames PSNR vs dense {psnr:.1f} dB"
    )
    assert report.num_steps == setup.steps and skipped > 0
