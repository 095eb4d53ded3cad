"""MagCache host plans: which steps compute and which reuse, through the real planning code.

Curves of constant ratio make the expected schedule countable by hand: a ratio of 1.0 never
adds error, so only retention, expert boundaries and K decide.
"""

import attrs
import numpy as np
import pytest

from wanjax.domain.caching import CacheSettings, plan_cache
from wanjax.domain.caching.magcache import ratios_for_steps
from wanjax.domain.caching.published import PUBLISHED
from wanjax.domain.config import GenerationConfig
from wanjax.domain.plan import LOW_NOISE, plan_sampling

FLAT = (1.0,) * 20  # 10 steps, cond and uncond: no error ever accumulates


def _reused(settings: CacheSettings, experts, *, uses_guidance: bool = True) -> list[int]:
    experts = np.asarray(experts, dtype=np.int32)
    plan = plan_cache(settings, experts, np.full(len(experts), 5.0), uses_guidance=uses_guidance)
    return np.flatnonzero(plan.features["magcache"].reuse_residual).tolist()


def test_k_limits_reuses_in_a_row_after_the_retention_zone():
    settings = CacheSettings(policy="magcache", mag_ratios=FLAT, magcache_K=2, retention_ratio=0.2)
    # retention int(0.2 * 10 + 0.5) = 2: steps 0, 1 compute; then compute one, reuse two
    assert _reused(settings, [0] * 10) == [2, 3, 5, 6, 8, 9]
    assert _reused(attrs.evolve(settings, magcache_K=1), [0] * 10) == [2, 4, 6, 8]


def test_threshold_bounds_the_accumulated_error():
    curve = (0.9,) * 20  # one step: err 0.1; two steps: 0.1 + 0.19
    below = CacheSettings(policy="magcache", mag_ratios=curve, magcache_thresh=0.09, retention_ratio=0.0)
    at = CacheSettings(policy="magcache", mag_ratios=curve, magcache_thresh=0.1, retention_ratio=0.0)
    assert _reused(below, [0] * 6) == []
    assert _reused(at, [0] * 6) == [1, 3, 5]  # err <= thresh (diffusers); step 0 has no residual yet


def test_two_experts_each_have_a_retention_zone_and_the_boundary_computes():
    settings = CacheSettings(policy="magcache", mag_ratios=FLAT, magcache_K=2, retention_ratio=0.2)
    experts = [0] * 6 + [1] * 4
    # high: int(1.2 + 0.5) = 1 retained step; low: int(0.8 + 0.5) = 1, the boundary step 6
    assert _reused(settings, experts) == [1, 2, 4, 5, 7, 8]
    # no retention at all: the boundary step still computes (the residual is the other expert's)
    assert _reused(attrs.evolve(settings, retention_ratio=0.0), experts) == [1, 2, 4, 5, 7, 8]
    assert 6 not in _reused(attrs.evolve(settings, retention_ratio=0.0, magcache_K=5), experts)


def test_both_passes_must_agree_unless_guidance_is_off():
    curve = (1.0, 0.5) * 10  # cond flat, uncond far off its cached residual
    settings = CacheSettings(policy="magcache", mag_ratios=curve, retention_ratio=0.0)
    assert _reused(settings, [0] * 10) == []
    assert _reused(settings, [0] * 10, uses_guidance=False) == [1, 2, 4, 5, 7, 8]


def test_split_curve_lands_its_expert_boundary_on_the_runs():
    published = PUBLISHED["wan2.2-t2v-a14b"]  # 40 steps, the jump (0.655) at its step 26
    experts = np.array([0] * 13 + [1] * 7)  # a 20-step run switching at 13
    ratios = ratios_for_steps(published.mag_ratios, published.mag_ratios_split, experts)  # [20, 2]
    assert ratios.shape == (20, 2)
    assert ratios[13, 0] == pytest.approx(0.65523) and (ratios[np.arange(20) != 13] > 0.75).all()
    assert ratios[0, 0] == 1.0 and ratios[-1, 0] == pytest.approx(0.80263)  # both ends kept


def test_wan22_t2v_preset_plan_respects_zones_boundary_and_k():
    config = GenerationConfig.from_mapping(dict(
        cache_model="wan2.2-t2v-a14b", cache_policy="magcache", magcache_thresh=0.04, height=64, width=64, num_frames=5
    ))
    request = config.request("a cat", num_inference_steps=40, flow_shift=12.0, guidance_scale_low=3.0)
    plan = plan_sampling(request, num_experts=2, model_boundary_ratio=0.875)
    reuse, boundary = plan.cache.features["magcache"].reuse_residual, int(np.argmax(plan.experts == LOW_NOISE))
    assert boundary == 26  # where the published curve jumps
    assert not reuse[:5].any() and not reuse[boundary : boundary + 3].any()  # int(0.2 n + 0.5) per expert
    runs = np.diff(np.flatnonzero(np.diff(np.r_[0, reuse.astype(int), 0])))[::2]
    assert runs.max() <= 2  # K
    assert 14 <= reuse.sum() <= 20  # maxdiffusion reports 18 of 40 skipped at this setting


def test_wan21_published_curve_reuses_between_retention_and_the_end():
    config = GenerationConfig.from_mapping(dict(cache_model="wan2.1-t2v-1.3b", cache_policy="magcache", height=64, width=64, num_frames=5))
    plan = plan_sampling(config.request("a cat", num_inference_steps=50))
    reuse = plan.cache.features["magcache"].reuse_residual
    assert not reuse[:10].any() and reuse.sum() > 15
    assert plan.cache.policy == "magcache" and list(plan.cache.features) == ["magcache"]
