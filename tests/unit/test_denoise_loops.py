"""The scan loop and the cross-attention KV cache give the latents of the plain path
(Python loop, K/V recomputed in every step), and are what runs when enabled.

Tiny random transformers (2 layers) on latents [1, 3, 4, 6, 16], 6 UniPC steps with guidance.
Tolerance: max|a - b| <= 1e-5 * max|b|, fp32. The paths run the same operations; what could
differ is XLA's fusion and summation order inside the while loop (measured: bit-identical
in every case on this CPU).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.extend import core as jex_core

from denoiser_cases import (
    CASES,
    IMAGE_TOKENS,
    LATENTS,
    SPEC,
    TEXT_TOKENS,
    TOKENS,
    Case,
    assert_close,
    case_experts,
    case_inputs,
    case_plan,
)

from wanjax.adapters.jax.denoising.caching.state import CacheControls
from wanjax.adapters.jax.denoising.denoiser import JaxDenoiser
from wanjax.adapters.jax.denoising.program import DenoiserOptions
from wanjax.adapters.jax.denoising.scan_loop import PlanArrays
from wanjax.domain.conditioning import Conditioning
from wanjax.domain.plan import HIGH_NOISE, LOW_NOISE

RELATIVE_TOLERANCE = 1e-5


def _denoise(case: Case, options: DenoiserOptions, experts=None, sample_solver: str = "unipc") -> np.ndarray:
    denoiser = JaxDenoiser(experts or case_experts(case), options)
    latents, context, negative = case_inputs()
    plan = case_plan(case.experts, 6, sample_solver)
    session = denoiser.session(plan, context, negative)
    session.prepare(latents, case.conditioning)
    return np.asarray(session.denoise(latents, conditioning=case.conditioning).latents)


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
    experts = case_experts(case)
    if case.experts == 2:
        assert {HIGH_NOISE, LOW_NOISE} <= set(case_plan(2, 6).experts)  # both experts run
    assert_close(_denoise(case, options, experts), _denoise(case, PLAIN, experts), RELATIVE_TOLERANCE)


def test_dpm_gives_the_same_latents_in_both_loops():
    """dpm++ is a table like UniPC (width 2, no corrector): the scan loop consumes it as the
    Python loop does, across the expert switch."""
    case = CASES["two-experts"]
    experts = case_experts(case)
    plan = case_plan(2, 6, "dpm++")
    assert plan.solver.width == 2 and {HIGH_NOISE, LOW_NOISE} <= set(plan.experts)
    scan = DenoiserOptions(use_kv_cache=False, scan_diffusion_loop=True)
    assert_close(_denoise(case, scan, experts, "dpm++"), _denoise(case, PLAIN, experts, "dpm++"), RELATIVE_TOLERANCE)


def _eqns(jaxpr: jex_core.Jaxpr):
    """Every equation, sub-jaxprs (scan, cond, pjit bodies) included."""
    for eqn in jaxpr.eqns:
        yield eqn
        for sub in jex_core.jaxprs_in_params(eqn.params):
            yield from _eqns(sub)


def test_scan_loop_is_one_scan_over_the_steps_with_the_expert_switch_inside():
    case = CASES["two-experts"]
    denoiser = JaxDenoiser(case_experts(case), DenoiserOptions(scan_diffusion_loop=True))
    latents, context, negative = case_inputs()
    plan = case_plan(2, 6)
    progress = []
    denoiser.session(plan, context, negative).denoise(latents, on_step=lambda done, total: progress.append(done))
    assert progress == [plan.num_steps]  # one dispatch: no per-step progress
    assert denoiser.num_compiled == 1 and denoiser.program.step.num_compiled == 0

    inputs = denoiser.program.inputs(LATENTS, context, negative, Conditioning(), abstract=False)
    state = plan.solver.initial_state(jnp.asarray(latents))
    cache = denoiser.program.initial_cache(CacheControls.of(plan.cache), state.sample, inputs)
    closed = jax.make_jaxpr(denoiser.program.scan_loop)(
        denoiser.program.params, state, PlanArrays.of(plan), inputs, cache
    )
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
    denoiser = JaxDenoiser(case_experts(case), DenoiserOptions(use_kv_cache=use_kv_cache))
    latents, context, negative = case_inputs()
    plan = case_plan(1, 6)
    inputs = denoiser.program.inputs(LATENTS, context, negative, Conditioning(), abstract=False)
    state = plan.solver.initial_state(jnp.asarray(latents))
    closed = jax.make_jaxpr(denoiser.program.guided_step)(*denoiser.program.step_arguments(state, plan, 0, inputs))
    # without the cache: text embedder (2) + to_k and to_v (batched over the layers)
    assert _text_projections(closed) == (0 if use_kv_cache else 4)


def test_cache_holds_every_layer_for_both_guidance_rows():
    case = CASES["i2v"]
    denoiser = JaxDenoiser(case_experts(case))
    latents, context, negative = case_inputs()
    inputs = denoiser.program.inputs(LATENTS, context, negative, case.conditioning, abstract=False)
    (kv,) = inputs.text
    heads, head_dim = SPEC.num_attention_heads, SPEC.attention_head_dim
    assert kv.text_k.shape == (SPEC.num_layers, 2, TEXT_TOKENS, heads, head_dim)
    assert kv.image_v.shape == (SPEC.num_layers, 2, IMAGE_TOKENS, heads, head_dim)
    assert inputs.conditioning.image_context is None  # consumed into the cache
    assert math.prod(inputs.rope.cos.shape) == TOKENS * head_dim // 2


def test_transformer_takes_either_the_context_or_its_cache():
    (model,) = case_experts(CASES["t2v"])
    latents, context, _ = case_inputs()
    timestep, cache = jnp.ones((1,)), model.cross_attention_kv(context)
    for bad in ({}, {"context": context, "cache": cache}):
        with pytest.raises(ValueError, match="either context .* or their cross_attention_kv cache"):
            model(latents, timestep, **bad)
    with pytest.raises(ValueError, match="cache does not fit this model and batch 1"):
        model(latents, timestep, cache=model.cross_attention_kv(jnp.concatenate([context] * 2)))
