"""The memory plan counts the step cache's state: each policy's `HeldState` sizes what its device
feature keeps from step to step (checked against the arrays its `initial_state` makes, abstractly,
at the published sizes), DBCache's residuals and each TaylorSeer order's difference included, and a
request whose state does not fit is refused naming it."""

import math

import attrs
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from wanjax.adapters.jax.denoising.caching.feature import CacheShapes
from wanjax.adapters.jax.denoising.caching.state import CacheControls, initial_cache_state
from wanjax.application.memory import DeviceSize, MemoryPlanner
from wanjax.application.presets import resolve_config
from wanjax.application.published import PublishedCheckpoint
from wanjax.domain import architectures
from wanjax.domain.config import GenerationConfig
from wanjax.domain.errors import InvalidRequestError
from wanjax.domain.memory import Workload, check_fits, plan_memory, step_cache_bytes
from wanjax.domain.plan import plan_sampling

SIZE = dict(height=480, width=832, num_frames=81, num_inference_steps=20, guidance_scale=5.0)
LATENTS = (1, 21, 60, 104, 16)  # [B, F', H', W', C] of 832x480x81
TOKENS = 21 * 30 * 52
WAN13 = Workload(  # Wan 2.1 1.3B at 832x480x81 with guidance, bf16, no VAE
    transformer=architectures.WAN21_T2V_1_3B, rows=2, tokens=TOKENS, text_tokens=512,
    weights_dtype="bfloat16", activations_dtype="bfloat16", attention="blockwise",
)  # fmt: skip
TOKEN_ARRAY = 2 * TOKENS * 1536 * 2  # [rows, tokens, width] bf16
POLICIES = {
    "magcache": {"cache_model": "wan2.1-t2v-1.3b", "magcache_thresh": "1", "retention_ratio": "0"},
    "teacache": {"cache_model": "wan2.1-t2v-1.3b"},
    "teacache-e": {"cache_model": "wan2.1-t2v-1.3b", "teacache_use_ret_steps": "false"},
    "cfg_cache": {},
    "sencache": {},
    "dbcache": {},
    "dbcache-taylorseer-1": {"enable_taylorseer": "true"},
    "dbcache-taylorseer-2": {"enable_taylorseer": "true", "taylorseer_order": "2"},
}  # fmt: skip


def _request(case: str, **sizes):
    config = GenerationConfig.from_mapping({"cache_policy": case.split("-")[0], **POLICIES[case]})
    return config.request("p", **{**SIZE, **sizes})


def _device_bytes(request, time_tokens: int = 1, latents=LATENTS, width: int = 1536) -> int:
    """The bytes of the arrays the request's device feature starts from (shapes only, nothing made)."""
    controls = CacheControls.of(plan_sampling(request).cache)
    assert controls.feature == request.cache.policy, "the plan must act, or the device holds nothing"
    shapes = CacheShapes(latents=latents, copies=2, tokens=math.prod(latents[1:4]) // 4, time_tokens=time_tokens,
                         width=width, activation_dtype=jnp.bfloat16, scheduler_dtype=jnp.float32)  # fmt: skip
    state = jax.eval_shape(lambda: initial_cache_state(controls, shapes))
    return sum(leaf.size * leaf.dtype.itemsize for leaf in jax.tree.leaves(state))


@pytest.mark.parametrize("case", list(POLICIES))
def test_the_plan_counts_what_each_policys_device_state_holds(case):
    request = _request(case)
    planned = step_cache_bytes(attrs.evolve(WAN13, step_cache=request.cache.held()))
    assert 0 <= _device_bytes(request) - planned <= 64  # the counters and flags, a few int32s, aside
    assert dict(plan_memory(attrs.evolve(WAN13, step_cache=request.cache.held()), platform="gpu",
                            available=None).parts)["step cache state"] == planned  # fmt: skip


def test_dbcache_holds_two_residuals_and_taylorseer_one_more_per_order():
    held = {case: step_cache_bytes(attrs.evolve(WAN13, step_cache=_request(case).cache.held()))
            for case in ("dbcache", "dbcache-taylorseer-1", "dbcache-taylorseer-2")}  # fmt: skip
    assert list(held.values()) == [2 * TOKEN_ARRAY, 3 * TOKEN_ARRAY, 4 * TOKEN_ARRAY]


def test_teacache_keeps_a_modulation_per_token_where_each_token_has_its_timestep():
    """Wan 2.2 TI2V with its first frame: [rows, tokens, 6, width] float32 beside the residual."""
    request = _request("teacache", height=704, width=1280, num_frames=121)
    ti2v = attrs.evolve(WAN13, transformer=architectures.WAN22_TI2V_5B, tokens=31 * 22 * 40, time_tokens=31 * 22 * 40)
    planned = step_cache_bytes(attrs.evolve(ti2v, step_cache=request.cache.held()))
    device = _device_bytes(request, time_tokens=31 * 22 * 40, latents=(1, 31, 44, 80, 48), width=3072)
    assert 0 <= device - planned <= 64 and planned > 6 * 2 * 31 * 22 * 40 * 3072 * 4


def test_the_state_splits_over_the_mesh_as_the_activations():
    work = attrs.evolve(WAN13, step_cache=_request("dbcache-taylorseer-2").cache.held())
    assert step_cache_bytes(attrs.evolve(work, row_shards=2, token_shards=4)) == 4 * TOKEN_ARRAY // 8


def test_a_request_whose_cache_state_does_not_fit_is_refused_naming_it():
    dense = plan_memory(WAN13, platform="gpu", available=None)
    cached = attrs.evolve(WAN13, step_cache=_request("dbcache-taylorseer-2").cache.held())
    tight = plan_memory(cached, platform="gpu", available=dense.peak + TOKEN_ARRAY)
    assert tight.peak == dense.peak + 4 * TOKEN_ARRAY and not tight.fits
    with pytest.raises(InvalidRequestError, match="step cache state"):
        check_fits(tight, cached)


def _planner(preset: str, overrides: dict, device: int):
    config = resolve_config(preset, overrides, read_checkpoint=False)
    settings = config.resolved("gpu")
    return config, MemoryPlanner(settings, PublishedCheckpoint.of(settings.model.location), DeviceSize(device=device))


def test_the_planner_counts_the_requests_step_cache_in_its_denoising_phase():
    config, planner = _planner("wan2.1-t2v-1.3b", {}, device=80 * 2**30)
    dense = planner.plan(config.request("a fox"))
    cached = config.request("a fox", cache=config.with_cache({"cache_policy": "dbcache", "enable_taylorseer": "true",
                                                              "taylorseer_order": "2"}, source="test"))  # fmt: skip
    work = planner.workload(cached)
    assert (work.step_cache.token_arrays, work.videos, work.time_tokens) == (4, 1, 1)
    state = dict(planner.plan(cached).phases)["denoising"] - dict(dense.phases)["denoising"]
    assert state == step_cache_bytes(work) == 4 * TOKEN_ARRAY


def test_the_planner_gives_each_token_its_timestep_for_wan22_ti2v_with_its_first_frame():
    config, planner = _planner("wan2.2-ti2v-5b", {"cache_policy": "teacache", "teacache_coefficients": "1,0"}, 80 * 2**30)
    image = np.zeros((704, 1280, 3), np.uint8)
    with_image, without = planner.workload(config.request("a fox", image=image)), planner.workload(config.request("a fox"))
    assert with_image.time_tokens == with_image.tokens and without.time_tokens == 1
