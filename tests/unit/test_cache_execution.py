"""How the device executes a CachePlan: the rules' arithmetic against numpy transcriptions of
docs/caching.md ("Device semantics"), and, counted at run time, that a skipped step really
runs no transformer block (an attention backend that reports every call it makes).

Tiny random transformers (2 layers, fp32) on latents [1, 3, 4, 6, 16], 8 UniPC steps.
"""

from __future__ import annotations

import dataclasses
from collections import Counter

import attrs
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from wanjax.adapters.jax.attention.xla import XlaAttention
from wanjax.adapters.jax.denoising.caching.calibration import residual_norms
from wanjax.adapters.jax.denoising.caching.cfg_cache import estimate_unconditional, low_frequency_mask
from wanjax.adapters.jax.denoising.caching.sencache import SenCacheState, SenCacheValues, sencache_decision
from wanjax.adapters.jax.denoising.caching.state import NO_CACHE, CacheControls
from wanjax.adapters.jax.denoising.caching.teacache import TeaCacheState, TeaCacheValues, teacache_decision
from wanjax.adapters.jax.denoising.denoiser import JaxDenoiser
from wanjax.adapters.jax.denoising.program import DenoiserOptions
from wanjax.adapters.jax.transformer.model import WanTransformer
from wanjax.adapters.jax.transformer.runtime import TransformerRuntime
from wanjax.domain.attention_call import AttentionCall
from wanjax.domain.caching import CachePlan
from wanjax.domain.caching.cfg_cache import CfgCachePlan
from wanjax.domain.caching.magcache import MagCachePlan
from wanjax.domain.caching.report import CacheRunReport
from wanjax.domain.caching.sencache import SenCachePlan, SenCacheRule
from wanjax.domain.caching.teacache import TeaCachePlan, TeaCacheRule
from wanjax.domain.errors import ConfigError
from wanjax.domain.plan import plan_sampling
from wanjax.domain.requests import GenerationRequest
from wanjax.domain.specs import TransformerSpec

STEPS = 8
SPEC = TransformerSpec(
    num_attention_heads=2, attention_head_dim=12, text_dim=32, freq_dim=32, ffn_dim=32, num_layers=2
)
LATENTS = (1, 3, 4, 6, 16)
CALLS_PER_BLOCK_STACK = 2 * SPEC.num_layers  # self- and cross-attention in every block


# --- the rules' arithmetic ---------------------------------------------------------------


def test_low_frequency_mask_keeps_the_outer_rows_and_first_columns_of_the_half_spectrum():
    mask = low_frequency_mask(8, 12)  # rfft2 over (8, 12): [8, 7]; ch = 2, cw = 1
    assert mask.shape == (8, 7)
    assert {tuple(ab) for ab in np.argwhere(mask)} == {(0, 0), (1, 0), (7, 0)}
    assert low_frequency_mask(2, 2).sum() == 1  # ch = cw = 1: the mean alone


def test_unconditional_estimate_weights_low_and_high_frequencies_apart(rng):
    # Tolerance 1e-5 absolute: an fp32 rfft2 / irfft2 round trip of O(1) values.
    conditional = rng.standard_normal((1, 2, 8, 12, 3), dtype=np.float32)
    constant = np.ones((1, 2, 8, 12, 3), np.float32)  # only the zero frequency: "low"
    checkerboard = np.indices((8, 12)).sum(0) % 2 * 2.0 - 1.0  # only the Nyquist frequency: "high"
    checkerboard = np.broadcast_to(checkerboard[None, None, :, :, None], constant.shape).astype(np.float32)
    weights = jnp.asarray([1.5, 0.25])
    for difference, gain in ((constant, 1.5), (checkerboard, 0.25)):
        got = estimate_unconditional(conditional, difference, weights)
        np.testing.assert_allclose(got, conditional + gain * difference, atol=1e-5)
    mixed = rng.standard_normal(constant.shape, dtype=np.float32)
    got = estimate_unconditional(conditional, mixed, jnp.ones(2))
    np.testing.assert_allclose(got, conditional + mixed, atol=1e-5)  # w_low = w_high = 1: cond + d


def test_teacache_decision_follows_the_documented_accumulator(rng):
    # Transcription of docs/caching.md per pass p: acc_p += max(polyval(c, rel_p), 0); reuse while
    # every acc_p < threshold, else compute and reset. Tolerance: fp32 sums of 2*1*6*4 values.
    rule = TeaCacheValues(jnp.float32(0.5), jnp.asarray([2.0, 0.1], jnp.float32), input_is_modulation=True)
    previous = rng.standard_normal((2, 1, 6, 4), dtype=np.float32)
    state = TeaCacheState(jnp.asarray(previous), jnp.asarray([0.1, 0.3], jnp.float32), residual=None)
    for scale, expect_reuse in ((1.01, True), (1.5, False)):
        measured = previous * scale
        reuse, after = teacache_decision(state, rule, jnp.asarray(measured), jnp.bool_(True))
        rel = np.abs(measured - previous).reshape(2, -1).sum(1) / np.abs(previous).reshape(2, -1).sum(1)
        accumulated = np.asarray(state.accumulated) + np.polyval([2.0, 0.1], rel)
        assert bool(reuse) == expect_reuse == bool((accumulated < 0.5).all())
        np.testing.assert_allclose(after.accumulated, accumulated if expect_reuse else 0.0, rtol=1e-6)
        np.testing.assert_array_equal(after.previous, measured)
    reuse, after = teacache_decision(state, rule, jnp.asarray(previous * 1.01), jnp.bool_(False))
    assert not reuse and not np.asarray(after.accumulated).any()  # a forced step computes and resets
    dipping = TeaCacheValues(jnp.float32(0.0), jnp.asarray([1.0, -0.5], jnp.float32), input_is_modulation=True)
    zero = TeaCacheState(jnp.asarray(previous), jnp.zeros(2, jnp.float32), residual=None)
    reuse, after = teacache_decision(zero, dipping, jnp.asarray(previous * 1.01), jnp.bool_(True))
    assert not reuse  # rel - 0.5 < 0 is clamped to 0: threshold 0 never reuses


def test_sencache_decision_follows_the_documented_drift(rng):
    # acc_x += RMS(x - x_ref), acc_t += |t / 1000 - t_ref|; reuse while alpha_x acc_x +
    # alpha_t acc_t <= threshold and n < max_reuse. Tolerance: fp32 mean of 72 squares.
    x_ref = rng.standard_normal((1, 2, 3, 4, 3), dtype=np.float32)
    sample = x_ref + 0.1 * rng.standard_normal(x_ref.shape, dtype=np.float32)
    state = SenCacheState(
        jnp.zeros_like(x_ref), jnp.asarray(x_ref), jnp.float32(0.9), jnp.float32(0.05), jnp.float32(0.01),
        jnp.int32(1), jnp.int32(0),
    )  # fmt: skip
    drift_x = 0.05 + np.sqrt(np.mean((sample - x_ref) ** 2))
    drift_t = 0.01 + abs(850.0 / 1000 - 0.9)
    score = 2.0 * drift_x + 3.0 * drift_t
    for threshold, max_reuse, expect_reuse in ((score + 1e-3, 2, True), (score - 1e-3, 2, False), (1e9, 1, False)):
        rule = SenCacheValues(jnp.float32(threshold), jnp.float32(2.0), jnp.float32(3.0), jnp.int32(max_reuse))
        reuse, after = sencache_decision(state, rule, jnp.asarray(sample), jnp.float32(850.0), jnp.bool_(True))
        assert bool(reuse) == expect_reuse
        np.testing.assert_allclose([after.drift_x, after.drift_t], [drift_x, drift_t], rtol=1e-5)
        assert int(after.reused) == 2


def test_residual_norms_average_the_rows_of_each_pass(rng):
    residual = rng.standard_normal((4, 5, 8), dtype=np.float32)  # [2 passes * B = 2, S, D]
    norms = np.linalg.norm(residual, axis=-1).reshape(2, 2, 5).mean(1)
    np.testing.assert_allclose(residual_norms(jnp.asarray(residual), 2), norms, rtol=1e-6)


def test_controls_carry_the_one_feature_the_plan_uses():
    assert CacheControls.of(CachePlan.dense(4)) is NO_CACHE
    magcache = CacheControls.of(CachePlan.of(4, MagCachePlan(reuse_residual=np.array([0, 1, 0, 1], bool))))
    assert magcache.feature == "magcache" and magcache.steps.tolist() == [False, True, False, True]
    assert magcache.params is None
    forced = np.array([1, 0, 0, 0], bool)
    tea = CacheControls.of(CachePlan.of(4, TeaCachePlan(rule=TeaCacheRule(threshold=0.2, coefficients=(1.0, 0.0)),
                                                        force_compute=forced)))  # fmt: skip
    assert tea.feature == "teacache" and tea.steps.shape == (4,) and tea.params.input_is_modulation
    assert tea.at(0).steps.shape == () and tea.at(0).params is tea.params  # parameters are not per step
    cfg = CfgCachePlan(cond_only=np.array([0, 1, 1, 0], bool), cfg_weights=np.ones((4, 2), np.float32))
    sen = SenCachePlan(rule=SenCacheRule(threshold=0.1, alpha_x=1.0, alpha_t=1.0, max_reuse=2), force_compute=forced)
    with pytest.raises(ConfigError, match="combines cfg_cache and sencache.*choose one"):
        CacheControls.of(CachePlan.of(4, cfg, sen))


# --- what runs, counted at run time ---------------------------------------------------------


@dataclasses.dataclass(frozen=True, eq=False)
class CountingAttention:
    """XLA attention that records, at run time, the batch rows of every call it makes."""

    rows: list[int] = dataclasses.field(default_factory=list)
    key_alignment: int = 1

    def check(self, call: AttentionCall) -> None:
        XlaAttention().check(call)

    def __call__(self, q: jax.Array, k: jax.Array, v: jax.Array, call: AttentionCall) -> jax.Array:
        batch = q.shape[0]
        jax.debug.callback(lambda: self.rows.append(batch))
        return XlaAttention()(q, k, v, call)


def _counted_run(cache: CachePlan, *, scan: bool) -> tuple[Counter, CacheRunReport]:
    attention = CountingAttention()
    runtime = TransformerRuntime(dtype=jnp.float32, param_dtype=jnp.float32, attention=attention)
    denoiser = JaxDenoiser([WanTransformer(SPEC, runtime, rngs=nnx.Rngs(0))], DenoiserOptions(scan_diffusion_loop=scan))
    request = GenerationRequest(prompt="p", height=32, width=48, num_frames=9, num_inference_steps=STEPS,
                                guidance_scale=5.0, flow_shift=3.0)  # fmt: skip
    plan = attrs.evolve(plan_sampling(request), cache=cache)
    rng = np.random.default_rng(0)
    latents = rng.standard_normal(LATENTS, dtype=np.float32)
    context, negative = (rng.standard_normal((1, 7, 32), dtype=np.float32) for _ in range(2))
    denoised = denoiser.session(plan, context, negative).denoise(latents)
    jax.block_until_ready(denoised.latents)
    jax.effects_barrier()
    return Counter(attention.rows), denoised.cache_report


def _steps(*indices: int) -> np.ndarray:
    flags = np.zeros(STEPS, bool)
    flags[list(indices)] = True
    return flags


DENSE = CachePlan.dense(STEPS)
FORCED = _steps(0, STEPS - 1)
POLICIES = {
    "magcache": CachePlan.of(STEPS, MagCachePlan(reuse_residual=_steps(2, 3, 5))),
    "cfg_cache": CachePlan.of(
        STEPS, CfgCachePlan(cond_only=_steps(2, 3, 5, 6), cfg_weights=np.tile(np.float32([1.2, 1.0]), (STEPS, 1)))
    ),
    "teacache": CachePlan.of(
        STEPS, TeaCachePlan(rule=TeaCacheRule(threshold=2.0, coefficients=(1.0, 0.0)), force_compute=FORCED)
    ),
    "sencache": CachePlan.of(
        STEPS,
        SenCachePlan(rule=SenCacheRule(threshold=1e9, alpha_x=1.0, alpha_t=1.0, max_reuse=2), force_compute=FORCED),
    ),
}
EXPECTED_BLOCK_STEPS = {  # (blocks ran on both passes, on the conditional pass alone)
    "magcache": (STEPS - 3, 0),
    "cfg_cache": (STEPS - 4, 4),
    "sencache": (4, 0),  # 0 computes, 1-2 reuse, 3 computes, 4-5 reuse, 6 computes, 7 forced
}


@pytest.mark.parametrize("scan", [False, True], ids=["python-loop", "scan-loop"])
@pytest.mark.parametrize("policy", list(POLICIES))
def test_a_skipped_step_runs_no_transformer_block(policy, scan):
    calls, report = _counted_run(POLICIES[policy], scan=scan)
    both = int((report.blocks_ran & report.unconditional_ran).sum())
    conditional_only = int((report.blocks_ran & ~report.unconditional_ran).sum())
    assert calls == Counter({2: both * CALLS_PER_BLOCK_STACK, 1: conditional_only * CALLS_PER_BLOCK_STACK}) - Counter()
    if policy in EXPECTED_BLOCK_STEPS:
        assert (both, conditional_only) == EXPECTED_BLOCK_STEPS[policy]
    else:  # TeaCache: decided from the data; it must have skipped something and kept the forced steps
        assert 0 < report.steps_skipped < STEPS - 2 and report.blocks_ran[FORCED].all()


def test_a_dense_run_reports_every_step_ran():
    calls, report = _counted_run(DENSE, scan=False)
    assert report.blocks_ran.all() and report.unconditional_ran.all() and report.transformer_ran.all()
    assert calls == Counter({2: STEPS * CALLS_PER_BLOCK_STACK}) and report.residual_norms is None
