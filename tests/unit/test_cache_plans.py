"""CFG cache, TeaCache and SenCache plans, through the real planning code (`plan_sampling`):
which steps run cond-only, which steps a device rule must compute, and the refusals."""

import numpy as np
import pytest

from wanjax.domain.caching.sencache import SenCacheRule
from wanjax.domain.caching.teacache import TeaCacheRule
from wanjax.domain.caching.published import PUBLISHED
from wanjax.domain.config import GenerationConfig
from wanjax.domain.errors import ConfigError, InvalidRequestError
from wanjax.domain.plan import LOW_NOISE, SamplingPlan, plan_sampling
from wanjax.domain.scheduling import unipc_table

SMALL = dict(height=64, width=64, num_frames=5)


def _plan(steps: int, *, two_experts: bool = False, request=None, **config):
    request = request or {}
    made = GenerationConfig.from_mapping({**SMALL, **config}).request("a cat", num_inference_steps=steps, **request)
    if two_experts:
        return plan_sampling(made, num_experts=2, model_boundary_ratio=0.875)
    return plan_sampling(made)


def test_no_policy_is_a_dense_plan():
    plan = _plan(6)
    assert plan.cache.is_dense and not plan.cache.features and plan.cache.num_steps == 6
    built = SamplingPlan(unipc_table(3, 3.0), np.ones(3, np.float32), np.zeros(3, np.int32), True)
    assert built.cache.is_dense and built.cache.num_steps == 3  # the default of a hand-made plan


def test_cfg_cache_schedule_of_wan21_at_480p():
    plan = _plan(50, cache_policy="cfg_cache", cfg_cache_end_ratio=0.96)
    # window [int(50 / 3), 48) = [16, 48), every 5th step from 16 full
    expected = [i for i in range(16, 48) if (i - 16) % 5]
    assert list(plan.cache.features) == ["cfg_cache"] and plan.cache.policy == "cfg_cache"
    cfg = plan.cache.features["cfg_cache"]
    assert np.flatnonzero(cfg.cond_only).tolist() == expected
    np.testing.assert_array_equal(cfg.cfg_weights[:25], np.float32([[1.2, 1.0]] * 25))  # before S // 2
    np.testing.assert_array_equal(cfg.cfg_weights[25:], np.float32([[1.0, 1.2]] * 25))


def test_cfg_cache_on_two_experts_caches_only_low_noise_after_a_full_step():
    plan = _plan(40, two_experts=True, cache_policy="cfg_cache", request=dict(flow_shift=12.0))
    boundary = int(np.argmax(plan.experts == LOW_NOISE))
    assert boundary == 26
    # window [13, 36); the high-noise expert never caches; step 26 is the low expert's first, full
    cfg = plan.cache.features["cfg_cache"]
    assert np.flatnonzero(cfg.cond_only).tolist() == [27, 29, 30, 31, 32, 34, 35]
    assert (cfg.cfg_weights[:boundary] == np.float32([1.2, 1.0])).all()
    assert (cfg.cfg_weights[boundary:] == np.float32([1.0, 1.2])).all()


def test_cfg_cache_needs_guidance_on_every_step():
    with pytest.raises(InvalidRequestError, match="cfg_cache.*guidance"):
        _plan(10, cache_policy="cfg_cache", request=dict(guidance_scale=1.0))
    with pytest.raises(InvalidRequestError, match="cfg_cache.*guidance"):
        _plan(10, two_experts=True, cache_policy="cfg_cache", request=dict(guidance_scale_low=1.0))


def test_sencache_forces_start_end_and_the_expert_boundary():
    plan = _plan(40, two_experts=True, cache_policy="sencache", request=dict(flow_shift=12.0))
    assert list(plan.cache.features) == ["sencache"]
    sen = plan.cache.features["sencache"]
    forced = np.flatnonzero(sen.force_compute).tolist()
    assert forced == [*range(12), 26, *range(36, 40)]  # int(40 * 0.3), boundary, int(40 * 0.9) on
    assert sen.rule == SenCacheRule(threshold=0.1, alpha_x=1.0, alpha_t=1.0, max_reuse=3)


def test_sencache_parameters_reach_the_rule():
    plan = _plan(20, cache_policy="sencache", sencache_thresh=0.2, sencache_K=1, sencache_start_ratio=0.0,
                 sencache_end_ratio=0.0)  # fmt: skip
    sen = plan.cache.features["sencache"]
    assert np.flatnonzero(sen.force_compute).tolist() == [0]  # step 0 always computes
    assert sen.rule.threshold == 0.2 and sen.rule.max_reuse == 1


def test_teacache_rule_carries_the_published_polynomial_of_the_chosen_input():
    ret = _plan(10, cache_policy="teacache", cache_model="wan2.1-t2v-14b", teacache_thresh=0.2)
    tea = ret.cache.features["teacache"]
    assert tea.rule == TeaCacheRule(
        threshold=0.2, coefficients=PUBLISHED["wan2.1-t2v-14b"].teacache_ret_steps, input_is_modulation=True
    )
    assert np.flatnonzero(tea.force_compute).tolist() == [0, 1, 2, 3, 4]  # ret_steps: 5 steps
    plain = _plan(10, cache_policy="teacache", cache_model="wan2.1-t2v-14b", teacache_use_ret_steps=False)
    tea = plain.cache.features["teacache"]
    assert tea.rule.coefficients == PUBLISHED["wan2.1-t2v-14b"].teacache_plain
    assert not tea.rule.input_is_modulation
    assert np.flatnonzero(tea.force_compute).tolist() == [0, 9]  # first and last step


def test_teacache_with_given_coefficients_forces_each_experts_first_step():
    plan = _plan(40, two_experts=True, cache_policy="teacache", teacache_coefficients=(1.0, 0.0),
                 request=dict(flow_shift=12.0))  # fmt: skip
    assert np.flatnonzero(plan.cache.features["teacache"].force_compute).tolist() == [0, 1, 2, 3, 4, 26]


def test_calibration_runs_dense_and_asks_for_the_norms():
    plan = _plan(8, magcache_calibration=True)
    assert list(plan.cache.features) == ["magcache_calibration"] and not plan.cache.is_dense
    assert plan.cache.policy == "magcache_calibration"


@pytest.mark.parametrize(
    "config, match",
    [
        (dict(cache_policy="magcache"), "no published MagCache curve"),
        (dict(cache_policy="teacache", cache_model="wan2.2-t2v-a14b"), "no published TeaCache"),
        (dict(cache_policy="magcache", cache_model="demo-x"), "cache_model"),
        (dict(cache_policy="sencache", magcache_calibration=True), "magcache_calibration"),
        (dict(magcache_K=0), "magcache_K"),
        (dict(retention_ratio=1.0), "retention_ratio"),
        (dict(teacache_thresh=-0.1), "teacache_thresh"),
        (dict(cfg_cache_interval=1), "cfg_cache_interval"),
        (dict(cfg_cache_start_ratio=0.9, cfg_cache_end_ratio=0.5), "window would be empty"),
        (dict(sencache_start_ratio=0.6, sencache_end_ratio=0.4), "sencache_start_ratio"),
        (dict(mag_ratios=(1.0, 1.0, 0.9)), "even count"),
        (dict(mag_ratios=(1.0, -1.0)), "positive"),
        (dict(mag_ratios=(1.0,) * 8, mag_ratios_split=4), "below the curve's 4 steps"),
    ],
)
def test_conflicting_or_out_of_range_settings_are_config_errors(config, match):
    with pytest.raises(ConfigError, match=match):
        GenerationConfig.from_mapping(config)
