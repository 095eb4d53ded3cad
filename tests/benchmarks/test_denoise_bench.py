"""Denoising speed: one guided step of wanjax beside diffusers' WanTransformer3DModel on the same
weights and inputs, achieved FLOP/s against this machine's matmul ceiling, and compile time
with and without scan_layers.

Skipped by default (`--benchmark-skip` in pyproject); run with
    .venv/bin/pytest tests/benchmarks/test_denoise_bench.py --benchmark-only -s
A step is classifier-free guided, so the transformer runs on a batch of 2 (conditional and
unconditional rows). wanjax times its compiled step (transformer, guidance, UniPC update),
with the KV cache (default) and without; diffusers times its transformer forward plus the
guidance combination, in torch on as many threads as XLA's CPU pool uses (all cores this
process may run on). Both fp32. FLOPs are `transformer_flops_per_step` (matmuls only; with
the cache the text K/V projections are not part of a step). The ceiling is one fp32
[4096, 4096] @ [4096, 4096] matmul in JAX, measured right before each timed test.
"""

from __future__ import annotations

import functools
import os
import time

import attrs
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from flax import nnx

from wanjax.adapters.demo.checkpoint import DEMO_TRANSFORMER
from wanjax.adapters.jax.denoising.denoiser import JaxDenoiser
from wanjax.adapters.jax.denoising.program import DenoiserOptions
from wanjax.adapters.jax.transformer.runtime import TransformerRuntime
from wanjax.adapters.jax.transformer.weights import abstract_transformer, load_transformer
from wanjax.domain.conditioning import Conditioning
from wanjax.domain.flops import matmul_flops, transformer_flops_per_step
from wanjax.domain.plan import plan_sampling
from wanjax.domain.requests import GenerationRequest
from wanjax.domain.specs import TransformerSpec

THREADS = len(os.sched_getaffinity(0))  # XLA's CPU thread pool: one thread per usable core
CEILING_N = 4096
WAN21_1_3B = TransformerSpec(num_attention_heads=12, attention_head_dim=128, ffn_dim=8960, num_layers=30, freq_dim=256)


@attrs.frozen
class Setup:
    spec: TransformerSpec
    latents: tuple[int, int, int, int, int]  # [1, F', H', W', C]
    text_tokens: int
    rounds: int


SETUPS = {
    # the demo preset: 192x128, 17 frames, 64 text tokens
    "demo": Setup(DEMO_TRANSFORMER, (1, 5, 16, 24, 16), 64, 10),
    # the 1.3B architecture, 4 of its 30 layers (one step of all 30 takes ~35 s here), 256x256, 9 frames
    "1.3b-arch-4-layers": Setup(attrs.evolve(WAN21_1_3B, num_layers=4), (1, 3, 32, 32, 16), 512, 3),
}


class Ceiling:
    """FLOP/s of one large fp32 matmul, what this CPU gives JAX at best; sampled before every
    timed round (pytest-benchmark's `setup`), so that the best step and the best ceiling are
    taken under the same load from other processes."""

    def __init__(self) -> None:
        self._a, self._b = (jax.random.normal(jax.random.key(i), (CEILING_N, CEILING_N)) for i in (0, 1))
        self._matmul = jax.jit(jnp.matmul).lower(self._a, self._b).compile()
        self.samples: list[float] = []

    def sample(self) -> None:
        start = time.perf_counter()
        self._matmul(self._a, self._b).block_until_ready()
        self.samples.append(matmul_flops(CEILING_N, CEILING_N, CEILING_N) / (time.perf_counter() - start))

    @property
    def best(self) -> float:
        return max(self.samples)


@pytest.fixture
def ceiling() -> Ceiling:
    ceiling = Ceiling()
    ceiling.sample()  # the first call pays one-time costs
    ceiling.samples.clear()
    return ceiling


@attrs.frozen
class Models:
    torch_model: torch.nn.Module
    jax_model: object
    latents: np.ndarray  # [1, F', H', W', C]
    contexts: np.ndarray  # [2, L, text_dim]: conditional, unconditional


@functools.cache
def _models(name: str) -> Models:
    from diffusers import WanTransformer3DModel

    setup = SETUPS[name]
    torch.manual_seed(0)
    config = {k: v for k, v in attrs.asdict(setup.spec).items() if v is not None}
    torch_model = WanTransformer3DModel(**config).eval()
    tensors = {k: v.numpy() for k, v in torch_model.state_dict().items()}
    runtime = TransformerRuntime(dtype=jnp.float32, param_dtype=jnp.float32)
    rng = np.random.default_rng(0)
    latents = rng.standard_normal(setup.latents, dtype=np.float32)
    contexts = rng.standard_normal((2, setup.text_tokens, setup.spec.text_dim), dtype=np.float32)
    return Models(torch_model, load_transformer(setup.spec, runtime, tensors), latents, contexts)


def _report(benchmark, label: str, flops: int, ceiling: Ceiling) -> None:
    seconds = benchmark.stats.stats.min
    achieved, best = flops / seconds, ceiling.best
    benchmark.extra_info.update(gflops_per_s=achieved / 1e9, ceiling_gflops_per_s=best / 1e9, fraction=achieved / best)
    print(f"\n{label}: {seconds * 1e3:.1f} ms/step, {flops / 1e9:.1f} GFLOP, {achieved / 1e9:.1f} GFLOP/s; "
          f"ceiling {best / 1e9:.1f} GFLOP/s; {achieved / best:.2f} of it")  # fmt: skip


@pytest.mark.parametrize("name", list(SETUPS))
@pytest.mark.parametrize("use_kv_cache", [True, False], ids=["kv-cache", "no-kv-cache"])
def test_wanjax_step(benchmark, ceiling, name, use_kv_cache):
    setup, models = SETUPS[name], _models(name)
    denoiser = JaxDenoiser([models.jax_model], DenoiserOptions(use_kv_cache=use_kv_cache))
    request = GenerationRequest(prompt="p", height=16, width=16, num_frames=1, num_inference_steps=2,
                                guidance_scale=5.0, flow_shift=3.0)  # fmt: skip
    plan = plan_sampling(request)
    context, negative = models.contexts[:1], models.contexts[1:]
    inputs = denoiser.program.inputs(setup.latents, context, negative, Conditioning(), abstract=False)
    args = denoiser.program.step_arguments(denoiser.program.initial_state(plan, models.latents), plan, 0, inputs)
    step = denoiser.program.step.prepare(*args)
    jax.block_until_ready(step(*args))  # warm-up
    benchmark.pedantic(lambda: jax.block_until_ready(step(*args)), setup=ceiling.sample, rounds=setup.rounds)
    flops = transformer_flops_per_step(setup.spec, *setup.latents[1:4], setup.text_tokens, 2, kv_cached=use_kv_cache)
    label = f"wanjax {name} ({'with' if use_kv_cache else 'without'} KV cache)"
    _report(benchmark, label, flops, ceiling)


@pytest.mark.parametrize("name", list(SETUPS))
def test_diffusers_step(benchmark, ceiling, name):
    setup, models = SETUPS[name], _models(name)
    torch.set_num_threads(THREADS)
    hidden = torch.from_numpy(np.concatenate([models.latents] * 2).transpose(0, 4, 1, 2, 3).copy())  # [2, C, F, H, W]
    timestep = torch.full((2,), 999.0)
    contexts = torch.from_numpy(models.contexts)

    def step() -> torch.Tensor:
        with torch.inference_mode():
            (velocity,) = models.torch_model(hidden, timestep, contexts, return_dict=False)
            conditional, unconditional = velocity.chunk(2)
            return unconditional + 5.0 * (conditional - unconditional)

    step()  # warm-up
    benchmark.pedantic(step, setup=ceiling.sample, rounds=setup.rounds)
    flops = transformer_flops_per_step(setup.spec, *setup.latents[1:4], setup.text_tokens, 2)
    _report(benchmark, f"diffusers {name} (torch {torch.__version__}, {THREADS} threads)", flops, ceiling)


@pytest.mark.parametrize("scan_diffusion_loop", [False, True], ids=["python-loop", "scan-loop"])
def test_wanjax_demo_denoise(benchmark, scan_diffusion_loop):
    """The demo preset's whole 8-step denoise (KV cache included): what the loop around the step costs."""
    setup, models = SETUPS["demo"], _models("demo")
    denoiser = JaxDenoiser([models.jax_model], DenoiserOptions(scan_diffusion_loop=scan_diffusion_loop))
    request = GenerationRequest(prompt="p", height=128, width=192, num_frames=17, num_inference_steps=8,
                                guidance_scale=5.0, flow_shift=3.0)  # fmt: skip
    plan = plan_sampling(request)
    session = denoiser.session(plan, models.contexts[:1], models.contexts[1:])
    session.prepare(models.latents)
    benchmark.pedantic(lambda: session.denoise(models.latents).latents, rounds=setup.rounds, warmup_rounds=1)
    loop = "scan_diffusion_loop" if scan_diffusion_loop else "Python loop"
    print(f"\nwanjax demo, 8 steps, {loop}: {benchmark.stats.stats.min * 1e3:.1f} ms")


@pytest.mark.parametrize("layers", [4, 8, 30])
@pytest.mark.parametrize("scan_layers", [True, False], ids=["scan_layers", "unrolled"])
def test_compile_time(benchmark, layers, scan_layers):
    """Trace, lower and compile one transformer forward of the 1.3B architecture with `layers`
    layers (abstract weights: nothing is materialised), on the mid-size step's shapes."""
    setup = SETUPS["1.3b-arch-4-layers"]
    spec = attrs.evolve(setup.spec, num_layers=layers)
    runtime = TransformerRuntime(dtype=jnp.float32, param_dtype=jnp.float32, scan_layers=scan_layers)
    graphdef, state = nnx.split(abstract_transformer(spec, runtime))
    latents = jax.ShapeDtypeStruct((2, *setup.latents[1:]), jnp.float32)
    timestep = jax.ShapeDtypeStruct((2,), jnp.float32)
    context = jax.ShapeDtypeStruct((2, setup.text_tokens, spec.text_dim), jnp.float32)
    cache = jax.eval_shape(lambda s, c: nnx.merge(graphdef, s).cross_attention_kv(c), state, context)

    def forward(state, latents, timestep, cache):
        return nnx.merge(graphdef, state)(latents, timestep, cache=cache)

    def compile_once() -> None:
        jax.jit(lambda *args: forward(*args)).lower(state, latents, timestep, cache).compile()

    benchmark.pedantic(compile_once, rounds=1, warmup_rounds=0)
    print(f"\ncompile, {layers} layers, {'scan_layers' if scan_layers else 'unrolled'}: "
          f"{benchmark.stats.stats.min:.1f} s")  # fmt: skip
