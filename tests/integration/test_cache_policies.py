"""Cache plans executed end to end by the JAX denoiser: the Python loop and the scan loop give
the same latents and run the same steps under every policy (one and two experts, T2V, I2V,
TI2V); a rule that never fires is bitwise the dense run; a residual or CFG difference of the
other expert is never used; changing plan values compiles nothing; a reused step is exactly
head(embed(x) + cached residual); calibration records the residual norms of the real blocks.

Tiny random transformers (2 layers, fp32) on latents [1, 3, 4, 6, 16], 8 UniPC steps with
guidance. Loop tolerance as tests/unit/test_denoise_loops.py: max|a - b| <= 1e-5 * max|b|
(measured: bit-identical on this CPU), and the per-step reports must match exactly.
"""

from __future__ import annotations

import math

import attrs
import jax.numpy as jnp
import numpy as np
import pytest

from denoiser_cases import CASES, LATENTS, Case, assert_close, case_experts, case_inputs, case_plan

from wanjax.adapters.jax.denoising.denoiser import JaxDenoiser
from wanjax.adapters.jax.denoising.program import DenoiserOptions
from wanjax.domain.attention_call import SELF, AttentionCall
from wanjax.domain.caching import CachePlan
from wanjax.domain.caching.calibration import CalibrationPlan
from wanjax.domain.caching.cfg_cache import CfgCachePlan
from wanjax.domain.caching.dbcache import DBCachePlan, DBCacheRule
from wanjax.domain.caching.magcache import MagCachePlan
from wanjax.domain.caching.sencache import SenCachePlan, SenCacheRule
from wanjax.domain.caching.teacache import TeaCachePlan, TeaCacheRule
from wanjax.domain.plan import LOW_NOISE, plan_sampling
from wanjax.domain.ports import Denoised
from wanjax.domain.requests import GenerationRequest
from wanjax.domain.scheduling import solver_step

RELATIVE_TOLERANCE = 1e-5
STEPS = 8


def _steps(*indices: int) -> np.ndarray:
    flags = np.zeros(STEPS, bool)
    flags[list(indices)] = True
    return flags


def _plan(feature_plan) -> CachePlan:
    return CachePlan.of(STEPS, feature_plan)


def _changed(plan: CachePlan, **changes) -> CachePlan:
    """The plan with its one feature plan's fields changed."""
    (feature_plan,) = plan.features.values()
    return _plan(attrs.evolve(feature_plan, **changes))


def _policies(experts: np.ndarray) -> dict[str, CachePlan]:
    """One plan per policy, its forced steps at the start, the end and each expert's first step."""
    first_of_expert = np.flatnonzero(np.diff(experts, prepend=-1))
    forced = _steps(0, STEPS - 1, *first_of_expert)
    weights = np.tile(np.float32([1.2, 1.0]), (STEPS, 1))
    return {
        "magcache": _plan(MagCachePlan(reuse_residual=_steps(2, 3, 5, 6) & ~forced)),
        "cfg_cache": _plan(CfgCachePlan(cond_only=_steps(2, 3, 5, 6) & ~forced, cfg_weights=weights)),
        "teacache": _plan(
            TeaCachePlan(rule=TeaCacheRule(threshold=2.0, coefficients=(1.0, 0.0)), force_compute=forced)
        ),
        "teacache-e": _plan(
            TeaCachePlan(
                rule=TeaCacheRule(threshold=2.0, coefficients=(1.0, 0.0), input_is_modulation=False),
                force_compute=forced,
            )
        ),
        "sencache": _plan(
            SenCachePlan(rule=SenCacheRule(threshold=2.0, alpha_x=1.0, alpha_t=1.0, max_reuse=2), force_compute=forced)
        ),
        "calibration": _plan(CalibrationPlan()),
        "dbcache": _plan(DBCachePlan(rule=_dbcache_rule(0.5), force_compute=forced)),
        "taylorseer": _plan(DBCachePlan(rule=_dbcache_rule(0.5, taylorseer_order=2), force_compute=forced)),
    }


def _dbcache_rule(threshold: float, **changes) -> DBCacheRule:
    """The first block decides, the second (the middle) may be skipped."""
    rule = DBCacheRule(first_blocks=1, last_blocks=0, threshold=threshold, max_cached=-1, max_continuous=-1)
    return attrs.evolve(rule, **changes)


def _run(denoiser: JaxDenoiser, case: Case, cache: CachePlan) -> Denoised:
    latents, context, negative = case_inputs()
    plan = attrs.evolve(case_plan(case.experts, STEPS), cache=cache)
    return denoiser.session(plan, context, negative).denoise(latents, conditioning=case.conditioning)


LOOP_MATRIX = [
    ("t2v", policy) for policy in ("magcache", "cfg_cache", "teacache", "teacache-e", "sencache", "calibration")
] + [
    ("two-experts", "magcache"), ("two-experts", "cfg_cache"), ("two-experts", "sencache"),
    ("i2v", "cfg_cache"), ("i2v-two-experts", "cfg_cache"), ("ti2v", "teacache"), ("ti2v", "sencache"),
    ("vace", "magcache"), ("vace", "cfg_cache"), ("animate", "magcache"), ("animate", "cfg_cache"),
    ("t2v", "dbcache"), ("two-experts", "taylorseer"), ("ti2v", "taylorseer"), ("animate", "dbcache"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "policy"), LOOP_MATRIX, ids=[f"{n}-{p}" for n, p in LOOP_MATRIX])
def test_python_and_scan_loops_run_the_same_steps_to_the_same_latents(name, policy):
    case = CASES[name]
    experts = case_experts(case)
    cache = _policies(case_plan(case.experts, STEPS).experts)[policy]
    loops = [JaxDenoiser(experts, DenoiserOptions(scan_diffusion_loop=scan)) for scan in (False, True)]
    python_run, scan_run = (_run(denoiser, case, cache) for denoiser in loops)
    assert_close(np.asarray(scan_run.latents), np.asarray(python_run.latents), RELATIVE_TOLERANCE)
    python_report, scan_report = python_run.cache_report, scan_run.cache_report
    for field in ("transformer_ran", "blocks_ran", "unconditional_ran"):
        np.testing.assert_array_equal(getattr(scan_report, field), getattr(python_report, field))
    if policy == "calibration":
        assert python_report.residual_norms.shape == (STEPS, 2, 3 * 2 * 3)  # [S, passes, tokens]
        np.testing.assert_allclose(scan_report.residual_norms, python_report.residual_norms, rtol=1e-5)
    else:
        skipped = ~(python_report.blocks_ran & python_report.unconditional_ran)
        assert skipped.any(), "the plan must skip something, or this test shows nothing"


@pytest.mark.parametrize("scan", [False, True], ids=["python-loop", "scan-loop"])
@pytest.mark.parametrize("name", ["t2v", "two-experts"])
def test_a_rule_that_never_fires_is_bitwise_the_dense_run(name, scan):
    case = CASES[name]
    denoiser = JaxDenoiser(case_experts(case), DenoiserOptions(scan_diffusion_loop=scan))
    dense = np.asarray(_run(denoiser, case, CachePlan.dense(STEPS)).latents)
    never = np.zeros(STEPS, bool)
    for feature_plan in (
        TeaCachePlan(rule=TeaCacheRule(threshold=0.0, coefficients=(1.0, 0.0)), force_compute=never),
        SenCachePlan(rule=SenCacheRule(threshold=0.0, alpha_x=1.0, alpha_t=1.0, max_reuse=2), force_compute=never),
        DBCachePlan(rule=_dbcache_rule(0.0, taylorseer_order=1), force_compute=never),  # its blocks in two ranges
    ):
        cached = _run(denoiser, case, _plan(feature_plan))
        assert cached.cache_report.steps_skipped == 0
        np.testing.assert_array_equal(np.asarray(cached.latents), dense)
    calibrated = _run(denoiser, case, _plan(CalibrationPlan()))
    np.testing.assert_array_equal(np.asarray(calibrated.latents), dense)  # calibration measures a dense run


@pytest.mark.parametrize("scan", [False, True], ids=["python-loop", "scan-loop"])
def test_a_cache_of_the_other_expert_is_never_used(scan):
    """Plans that (wrongly) reuse on the first low-noise step: the device computes it anyway."""
    case = CASES["two-experts"]
    experts = case_plan(case.experts, STEPS).experts
    boundary = int(np.argmax(experts == LOW_NOISE))
    assert 0 < boundary < STEPS - 1
    denoiser = JaxDenoiser(case_experts(case), DenoiserOptions(scan_diffusion_loop=scan))
    around = _steps(boundary, boundary + 1)
    report = _run(denoiser, case, _plan(MagCachePlan(reuse_residual=around))).cache_report
    np.testing.assert_array_equal(report.blocks_ran[boundary : boundary + 2], [True, False])
    cfg_weights = np.ones((STEPS, 2), np.float32)
    report = _run(denoiser, case, _plan(CfgCachePlan(cond_only=around, cfg_weights=cfg_weights))).cache_report
    np.testing.assert_array_equal(report.unconditional_ran[boundary : boundary + 2], [True, False])
    rule = SenCacheRule(threshold=1e9, alpha_x=1.0, alpha_t=1.0, max_reuse=STEPS)
    report = _run(denoiser, case, _plan(SenCachePlan(rule=rule, force_compute=_steps(0)))).cache_report
    expected = experts == experts[np.arange(STEPS) - 1]  # reuse except where the expert changes
    expected[0] = False
    np.testing.assert_array_equal(report.transformer_ran, ~expected)


@pytest.mark.parametrize("scan", [False, True], ids=["python-loop", "scan-loop"])
def test_changing_plan_values_compiles_nothing(scan, compile_counter):
    case = CASES["two-experts"]
    denoiser = JaxDenoiser(case_experts(case), DenoiserOptions(scan_diffusion_loop=scan))
    experts = case_plan(case.experts, STEPS).experts
    variants = {
        "magcache": lambda p: _changed(p, reuse_residual=_steps(3, 4)),
        "cfg_cache": lambda p: _changed(p, cond_only=_steps(6), cfg_weights=np.full((STEPS, 2), 0.5, np.float32)),
        "teacache": lambda p: _changed(p, rule=TeaCacheRule(threshold=0.5, coefficients=(3.0, 1.0))),
        "sencache": lambda p: _changed(p, rule=attrs.evolve(p.features["sencache"].rule, threshold=0.1, max_reuse=1)),
        "dbcache": lambda p: _changed(p, rule=_dbcache_rule(0.9, max_continuous=1), force_compute=_steps(0, 5)),
    }
    for policy, change in variants.items():
        plan = _policies(experts)[policy]
        first = _run(denoiser, case, plan).latents
        compiled, compilations = denoiser.num_compiled, compile_counter.count
        second = _run(denoiser, case, change(plan)).latents
        assert (denoiser.num_compiled, compile_counter.count) == (compiled, compilations), policy
        assert not np.array_equal(first, second), f"{policy}: the changed values must change the run"


def test_a_reused_step_is_the_head_of_the_tokens_plus_the_cached_residual():
    """Two steps by hand with the model's stages; the second reuses the first's residual."""
    case = CASES["t2v"]
    (model,) = case_experts(case)
    latents, context, negative = case_inputs()
    request = GenerationRequest(prompt="p", height=32, width=48, num_frames=9, num_inference_steps=2,
                                guidance_scale=5.0, flow_shift=3.0)  # fmt: skip
    plan = plan_sampling(request)
    plan = attrs.evolve(plan, cache=CachePlan.of(2, MagCachePlan(reuse_residual=np.array([False, True]))))
    denoiser = JaxDenoiser([model])
    run = denoiser.session(plan, context, negative).denoise(latents)

    kv = model.cross_attention_kv(jnp.concatenate([context, negative]))
    grid = model.token_grid(latents.shape)
    state = plan.solver.initial_state(jnp.asarray(latents))
    residual = None
    for i in range(2):
        x = jnp.concatenate([state.sample] * 2)
        tokens, time = model.embed(x, jnp.full((2,), plan.timesteps[i], jnp.float32))
        if residual is None:
            attention = AttentionCall(kind=SELF, grid=grid)
            residual = model.run_blocks(tokens, kv, time.temb6, model.rope_tables(latents.shape), attention=attention)
            residual = residual - tokens
        conditional, unconditional = jnp.split(model.head(tokens + residual, time, grid), 2)
        velocity = unconditional + plan.guidance_scales[i] * (conditional - unconditional)
        state = solver_step(state, velocity, plan.solver.row(i))
    np.testing.assert_array_equal(run.cache_report.blocks_ran, [True, False])
    assert_close(np.asarray(run.latents), np.asarray(state.sample), RELATIVE_TOLERANCE)


def test_calibration_records_the_norms_of_the_block_residual():
    case = CASES["t2v"]
    (model,) = case_experts(case)
    latents, context, negative = case_inputs()
    denoiser = JaxDenoiser([model])
    plan = attrs.evolve(case_plan(case.experts, STEPS), cache=_plan(CalibrationPlan()))
    norms = denoiser.session(plan, context, negative).denoise(latents).cache_report.residual_norms  # [S, P, T]

    x = jnp.concatenate([jnp.asarray(latents)] * 2)  # step 0 sees the initial latents
    tokens, time = model.embed(x, jnp.full((2,), plan.timesteps[0], jnp.float32))
    kv = model.cross_attention_kv(jnp.concatenate([context, negative]))
    attention = AttentionCall(kind=SELF, grid=model.token_grid(latents.shape))
    residual = model.run_blocks(tokens, kv, time.temb6, model.rope_tables(latents.shape), attention=attention)
    residual = residual - tokens  # [2, T, D]
    # Tolerance 1e-5 relative: the same fp32 blocks, compiled apart from the loop's.
    np.testing.assert_allclose(norms[0], np.linalg.norm(np.asarray(residual), axis=-1), rtol=1e-5)
    assert norms.shape == (STEPS, 2, math.prod(grid for grid in model.token_grid(LATENTS)))
