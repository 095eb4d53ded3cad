"""The scan loop and the cross-attention KV cache give the latents of the plain path
(Python loop, K/V recomputed in every step), and are what runs when enabled.

Tiny random transformers (2 layers) on latents [1, 3, 4, 6, 16], 6 UniPC steps with guidance.
Tolerance: max|a - b| <= 1e-5 * max|b|, fp32. The paths run the same operations; what could
differ is XLA's fusion and summation order inside the while loop (measured: bit-identical
in every case on this CPU).
"""

from __future__ import annotations

import math

import attrs
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from jax.extend import core as jex_core

from wanjax.adapters.jax.denoising import DenoiserOptions, JaxDenoiser
from wanjax.adapters.jax.scan_loop import PlanArrays
from wanjax.adapters.jax.transformer.model import WanTransformer
from wanjax.adapters.jax.transformer.runtime import TransformerRuntime
from wanjax.domain.conditioning import Conditioning
from wanjax.domain.plan import HIGH_NOISE, LOW_NOISE, plan_sampling
from wanjax.domain.requests import GenerationRequest
from wanjax.domain.specs import TransformerSpec

RELATIVE_TOLERANCE = 1e-5
SPEC = TransformerSpec(
    num_attention_heads=2, attention_head_dim=12, text_dim=32, freq_dim=32, ffn_dim=32, num_layers=2
)
I2V_SPEC = attrs.evolve(SPEC, in_channels=36, image_dim=20, added_kv_proj_dim=24)
LATENTS, TEXT_TOKENS, IMAGE_TOKENS = (1, 3, 4, 6, 16), 7, 5
TOKENS = 3 * 2 * 3  # F' * H'/2 * W'/2


@attrs.frozen
class Case:
    spec: TransformerSpec
    experts: int
    conditioning: Conditioning


def _cases() -> dict[str, Case]:
    rng = np.random.default_rng(3)
    normal = lambda *shape: rng.standard_normal(shape, dtype=np.float32)  # noqa: E731
    i2v = Conditioning(extra_channels=normal(*LATENTS[:-1], 20), image_context=normal(1, IMAGE_TOKENS, 20))
    return {
        "t2v": Case(SPEC, 1, Conditioning()),
        "two-experts": Case(SPEC, 2, Conditioning()),
        "i2v": Case(I2V_SPEC, 1, i2v),
        "i2v-two-experts": Case(attrs.evolve(SPEC, in_channels=36), 2, i2v._replace(image_context=None)),
        "ti2v": Case(SPEC, 1, Conditioning(first_frame=normal(1, 1, *LATENTS[2:]))),
    }


CASES = _cases()


def _experts(case: Case) -> list[WanTransformer]:
    runtime = TransformerRuntime(dtype=jnp.float32, param_dtype=jnp.float32)
    return [WanTransformer(case.spec, runtime, rngs=nnx.Rngs(seed)) for seed in range(case.experts)]


def _plan(experts: int, steps: int = 6):
    request = GenerationRequest(
        prompt="p", height=32, width=48, num_frames=9, num_inference_steps=steps, guidance_scale=5.0,
        guidance_scale_low=2.5 if experts == 2 else None, flow_shift=3.0,
    )  # fmt: skip
    return plan_sampling(request, num_experts=experts, model_boundary_ratio=0.875)


def _inputs():
    rng = np.random.default_rng(0)
    latents = rng.standard_normal(LATENTS, dtype=np.float32)
    context, negative = (rng.standard_normal((1, TEXT_TOKENS, 32), dtype=np.float32) for _ in range(2))
    return latents, context, negative


def _denoise(case: Case, options: DenoiserOptions, experts=None) -> np.ndarray:
    denoiser = JaxDenoiser(experts or _experts(case), options)
    latents, context, negative = _inputs()
    plan = _plan(case.experts)
    denoiser.prepare(latents, plan, context, negative, case.conditioning)
    return np.asarray(denoiser.denoise(latents, plan, context, negative, conditioning=case.conditioning))


def _assert_close(got: np.ndarray, expected: np.ndarray) -> None:
    error = np.max(np.abs(got - expected)) / np.max(np.abs(expected))
    assert error <= RELATIVE_TOLERANCE, f"relative error {error:.2e}"


PLAIN = DenoiserOptions(use_kv_cache=False, scan_diffusion_loop=False)


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize(
    "options",
    [
        DenoiserOptions(use_kv_cache=True, scan_diffusion_loop=False),
        DenoiserOptions(use_kv_cache=False, scan_diffusion_loop=True),
        DenoiserOptions(use_kv_cache=True, scan_diffusion_loop=True),
    ],
    ids=["kv-cache", "scan", "kv-cache+scan"],
)
def test_option_gives_the_plain_path_latents(name, options):
    case = CASES[name]
    experts = _experts(case)
    if case.experts == 2:
        assert {HIGH_NOISE, LOW_NOISE} <= set(_plan(2).experts)  # both experts run
    _assert_close(_denoise(case, options, experts), _denoise(case, PLAIN, experts))


def _eqns(jaxpr: jex_core.Jaxpr):
    """Every equation, sub-jaxprs (scan, cond, pjit bodies) included."""
    for eqn in jaxpr.eqns:
        yield eqn
        for sub in jex_core.jaxprs_in_params(eqn.params):
            yield from _eqns(sub)


def test_scan_loop_is_one_scan_over_the_steps_with_the_expert_switch_inside():
    case = CASES["two-experts"]
    denoiser = JaxDenoiser(_experts(case), DenoiserOptions(scan_diffusion_loop=True))
    latents, context, negative = _inputs()
    plan = _plan(2)
    progress = []
    denoiser.denoise(latents, plan, context, negative, on_step=lambda done, total: progress.append(done))
    assert progress == [plan.num_steps]  # one dispatch: no per-step progress
    assert denoiser.num_compiled == 1 and denoiser._step.num_compiled == 0

    inputs = denoiser._inputs(LATENTS, context, negative, Conditioning(), abstract=False)
    state = plan.solver.initial_state(jnp.asarray(latents))
    closed = jax.make_jaxpr(denoiser._scan_loop)(denoiser._params, state, PlanArrays.of(plan), inputs)
    top = [e for e in closed.jaxpr.eqns if e.primitive.name == "scan"]
    assert len(top) == 1 and top[0].params["length"] == plan.num_steps
    switches = [e for e in _eqns(top[0].params["jaxpr"].jaxpr) if e.primitive.name == "cond"]
    assert len(switches) == 1 and len(switches[0].params["branches"]) == 2


def _text_projections(closed: jex_core.ClosedJaxpr) -> int:
    """dot_generals on text tokens alone (an operand with the L axis, none with the S axis): the
    text embedder and the cross-attention K/V projections."""
    count = 0
    for eqn in _eqns(closed.jaxpr):
        if eqn.primitive.name == "dot_general":
            shapes = [v.aval.shape for v in eqn.invars]
            if any(TEXT_TOKENS in s for s in shapes) and not any(TOKENS in s for s in shapes):
                count += 1
    return count


@pytest.mark.parametrize("use_kv_cache", [True, False])
def test_step_with_the_cache_projects_no_text(use_kv_cache):
    case = CASES["t2v"]
    denoiser = JaxDenoiser(_experts(case), DenoiserOptions(use_kv_cache=use_kv_cache))
    latents, context, negative = _inputs()
    plan = _plan(1)
    inputs = denoiser._inputs(LATENTS, context, negative, Conditioning(), abstract=False)
    state = plan.solver.initial_state(jnp.asarray(latents))
    closed = jax.make_jaxpr(denoiser._guided_step)(*denoiser._step_args(state, plan, 0, inputs))
    # without the cache: text embedder (2) + to_k and to_v (batched over the layers)
    assert _text_projections(closed) == (0 if use_kv_cache else 4)


def test_cache_holds_every_layer_for_both_guidance_rows():
    case = CASES["i2v"]
    denoiser = JaxDenoiser(_experts(case))
    latents, context, negative = _inputs()
    inputs = denoiser._inputs(LATENTS, context, negative, case.conditioning, abstract=False)
    (kv,) = inputs.text
    heads, head_dim = SPEC.num_attention_heads, SPEC.attention_head_dim
    assert kv.text_k.shape == (SPEC.num_layers, 2, TEXT_TOKENS, heads, head_dim)
    assert kv.image_v.shape == (SPEC.num_layers, 2, IMAGE_TOKENS, heads, head_dim)
    assert inputs.conditioning.image_context is None  # consumed into the cache
    assert math.prod(inputs.rope.cos.shape) == TOKENS * head_dim // 2


def test_transformer_takes_either_the_context_or_its_cache():
    (model,) = _experts(CASES["t2v"])
    latents, context, _ = _inputs()
    timestep, cache = jnp.ones((1,)), model.cross_attention_kv(context)
    for bad in ({}, {"context": context, "cache": cache}):
        with pytest.raises(ValueError, match="either context .* or their cross_attention_kv cache"):
            model(latents, timestep, **bad)
    with pytest.raises(ValueError, match="cache does not fit this model and batch 1"):
        model(latents, timestep, cache=model.cross_attention_kv(jnp.concatenate([context] * 2)))
