"""Step caches are plugins: each registered policy has a device feature of the same name, owns
its flat config keys through its settings section, and the domain alone says which may combine."""

from __future__ import annotations

import attrs
import numpy as np
import pytest

from wanjax.adapters.jax.denoising.caching.registry import FEATURES
from wanjax.domain.caching import POLICIES, CacheSettings, combinations, plan_cache
from wanjax.domain.caching.registry import REGISTRY
from wanjax.domain.errors import InvalidRequestError


def test_every_policy_has_a_device_feature_of_its_name():
    assert set(FEATURES) == set(REGISTRY)
    assert all(feature.name == name for name, feature in FEATURES.items())


def test_the_flat_cache_keys_are_the_sections_fields():
    owned = [field.name for policy in REGISTRY.values() for field in attrs.fields(policy.settings)]
    assert len(owned) == len(set(owned)), "a key must have one owner"
    assert [field.name for field in attrs.fields(CacheSettings)] == ["policy", "model", *owned]
    assert POLICIES == ("none", *(name for name, policy in REGISTRY.items() if policy.chosen_by_name))
    settings = CacheSettings(policy="cfg_cache", cfg_cache_interval=3, sencache_K=4)
    assert settings.section("cfg_cache").cfg_cache_interval == 3 and settings.section("sencache").sencache_K == 4


def test_a_section_validates_its_keys_whatever_the_policy():
    with pytest.raises(InvalidRequestError, match="sencache_start_ratio"):
        CacheSettings(policy="magcache", model="wan2.1-t2v-1.3b", sencache_start_ratio=0.6, sencache_end_ratio=0.4)
    with pytest.raises(InvalidRequestError, match="cfg_cache_interval"):
        CacheSettings(cfg_cache_interval=1)


def test_which_policies_may_combine_is_the_domains_rule(monkeypatch):
    calibrating = dict(policy="sencache", magcache_calibration=True)
    with pytest.raises(InvalidRequestError, match="magcache_calibration and sencache cannot run together"):
        CacheSettings(**calibrating)
    pair = frozenset({"sencache", "magcache_calibration"})
    monkeypatch.setattr(combinations, "ALLOWED_COMBINATIONS", frozenset({pair}))
    settings = CacheSettings(**calibrating)
    experts = np.zeros(10, np.int32)
    plan = plan_cache(settings, experts, np.full(10, 5.0), uses_guidance=True)
    assert set(plan.features) == pair
