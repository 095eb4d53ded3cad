"""DBCache's settings, plan and model checks, and its TaylorSeer ladder against cache-dit's own
`TaylorSeerState` (the pipelines' parity is tests/parity/test_dbcache_parity.py)."""

from __future__ import annotations

import attrs
import jax.numpy as jnp
import numpy as np
import pytest

from wanjax.adapters.jax.denoising.caching.taylorseer import TaylorSeerState
from wanjax.domain.caching import CacheSettings
from wanjax.domain.caching.dbcache import DBCacheRule, DBCacheSettings
from wanjax.domain.config import GenerationConfig
from wanjax.domain.errors import ConfigError, InvalidRequestError
from wanjax.domain.plan import LOW_NOISE, plan_sampling
from wanjax.domain.specs import TransformerSpec


def test_the_keys_and_defaults_are_cache_dits():
    from cache_dit import DBCacheConfig, TaylorSeerCalibratorConfig

    reference, ours = DBCacheConfig(), DBCacheSettings()
    for field in attrs.fields(DBCacheSettings):
        if field.name == "enable_taylorseer":
            assert ours.enable_taylorseer is False  # cache-dit: no calibrator_config, no TaylorSeer
        elif field.name == "taylorseer_order":
            assert ours.taylorseer_order == TaylorSeerCalibratorConfig().taylorseer_order
        else:
            assert getattr(ours, field.name) == getattr(reference, field.name), field.name


def _plan(steps: int, *, two_experts: bool = False, **keys):
    config = GenerationConfig.from_mapping({"height": 64, "width": 64, "num_frames": 5, "cache_policy": "dbcache", **keys})
    request = config.request("a cat", num_inference_steps=steps)
    if two_experts:
        return plan_sampling(request, num_experts=2, model_boundary_ratio=0.875)
    return plan_sampling(request)


def test_the_plan_carries_the_rule_and_each_experts_warmup():
    plan = _plan(12, Fn_compute_blocks=2, Bn_compute_blocks=1, max_warmup_steps=3, warmup_interval=2)
    (feature,) = plan.cache.features.values()
    assert feature.rule == DBCacheRule(
        first_blocks=2, last_blocks=1, threshold=0.08, max_cached=-1, max_continuous=-1, taylorseer_order=None
    )
    assert np.flatnonzero(feature.force_compute).tolist() == [0, 2]  # range(0, 3, 2)
    two = _plan(12, two_experts=True, max_warmup_steps=2, enable_taylorseer=True, taylorseer_order=2)
    (feature,) = two.cache.features.values()
    low = int(np.flatnonzero(two.experts == LOW_NOISE)[0])
    # cache-dit counts each expert's steps from its own first: both warm up
    assert np.flatnonzero(feature.force_compute).tolist() == [0, 1, low, low + 1]
    assert feature.rule.taylorseer_order == 2


def test_no_warmup_still_computes_each_experts_first_step():
    plan = _plan(8, two_experts=True, max_warmup_steps=0)
    (feature,) = plan.cache.features.values()
    low = int(np.flatnonzero(plan.experts == LOW_NOISE)[0])
    assert np.flatnonzero(feature.force_compute).tolist() == [0, low]


@pytest.mark.parametrize(
    ("key", "value"),
    [("Fn_compute_blocks", "0"), ("Bn_compute_blocks", "-1"), ("warmup_interval", "0"), ("taylorseer_order", "-1")],
)
def test_what_cache_dit_cannot_run_is_refused_by_name(key, value):
    with pytest.raises(ConfigError, match=key):
        GenerationConfig().with_overrides({"cache_policy": "dbcache", key: value})


def test_cache_dits_open_limits_are_accepted():
    settings = CacheSettings(
        policy="dbcache", residual_diff_threshold=-1.0, max_warmup_steps=-2, max_cached_steps=-5, warmup_interval=-1
    )
    assert settings.section("dbcache").max_cached_steps == -5


def test_the_model_must_have_the_blocks_and_no_vace():
    spec = TransformerSpec(num_layers=4)
    CacheSettings(policy="dbcache", Fn_compute_blocks=4, Bn_compute_blocks=4).check_model(spec)
    with pytest.raises(InvalidRequestError, match="Fn_compute_blocks=5: this transformer has 4 blocks"):
        CacheSettings(policy="dbcache", Fn_compute_blocks=5).check_model(spec)
    with pytest.raises(InvalidRequestError, match="Bn_compute_blocks=6"):
        CacheSettings(policy="dbcache", Fn_compute_blocks=1, Bn_compute_blocks=6).check_model(spec)
    with pytest.raises(InvalidRequestError, match="this model's vace blocks read the tokens entering its first block"):
        CacheSettings(policy="dbcache", Fn_compute_blocks=1).check_model(attrs.evolve(spec, vace_layers=(0,), vace_in_channels=8))
    CacheSettings(Fn_compute_blocks=50).check_model(spec)  # not the policy: nothing to refuse


@pytest.mark.parametrize("order", [1, 2])
def test_the_taylorseer_ladder_forecasts_as_cache_dits(order):
    """One pass, a context of 10 steps computing on steps 0, 1, 2, 5, 6 and 9 and forecasting on
    the others, against cache-dit's `TaylorSeerState` driven as its DBCache drives it (created at
    the first computed step, advanced every step after)."""
    import torch
    from cache_dit.caching.cache_contexts.calibrators.taylorseer import TaylorSeerState as Reference

    rng = np.random.default_rng(order)
    reference, ours = None, TaylorSeerState.empty(order, 1, 2, 3, 4, jnp.float32)
    for step in range(10):
        if reference is not None:
            reference.mark_step_begin()
        calibrator_step = jnp.int32(step - 1)
        if step in (0, 1, 2, 5, 6, 9):
            residual = rng.standard_normal((2, 3, 4), dtype=np.float32)
            reference = reference or Reference(n_derivatives=order)
            reference.update(torch.from_numpy(residual))
            ours = ours.updated(jnp.asarray(residual), jnp.array([True]), calibrator_step)
        else:
            expected = reference.approximate().numpy()
            np.testing.assert_allclose(np.asarray(ours.forecast(calibrator_step)), expected, rtol=1e-6, atol=1e-6)
    assert int(ours.known[0]) == order + 1  # every difference was taken by the end
