"""`offload=layers`: the blocks' weights in host memory (`pinned_host`, which the CPU backend has
too), streamed to the device block by block inside the layer scan; `offload=components`: each
expert's weights in host memory, on the device only while its steps run (`all`: both). The latents
equal the resident model's bit for bit, and the compiled step holds about two blocks' weights on
the device."""

from __future__ import annotations

import functools

import attrs
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from jax.sharding import SingleDeviceSharding

from denoiser_cases import CASES, case_experts, case_inputs, case_plan

from wanjax.adapters.jax.denoising.caching.feature import CacheState
from wanjax.adapters.jax.denoising.caching.state import NO_CACHE
from wanjax.adapters.jax.denoising.denoiser import JaxDenoiser
from wanjax.adapters.jax.denoising.program import DenoiserOptions
from wanjax.adapters.jax.denoising.step import Step, StepModel, StepValues, denoise_step
from wanjax.adapters.jax.transformer.model import WanTransformer
from wanjax.adapters.jax.transformer.offload import HOST_MEMORY
from wanjax.adapters.jax.transformer.runtime import TransformerRuntime
from wanjax.domain.architectures import WAN21_T2V_1_3B
from wanjax.domain.caching import CachePlan
from wanjax.domain.caching.cfg_cache import CfgCachePlan
from wanjax.domain.caching.dbcache import DBCachePlan, DBCacheRule
from wanjax.domain.caching.magcache import MagCachePlan
from wanjax.domain.caching.sencache import SenCachePlan, SenCacheRule
from wanjax.domain.caching.teacache import TeaCachePlan, TeaCacheRule
from wanjax.domain.conditioning import Conditioning

STEPS = 4


@functools.cache
def _resident(case_name: str, scan: bool) -> np.ndarray:
    """The resident model's latents, made once for every offload compared with them."""
    return _denoise(case_name, DenoiserOptions(scan_diffusion_loop=scan))


@functools.cache
def _streamed(case_name: str, scan: bool) -> np.ndarray:
    """The latents with the blocks streamed (`offload=layers`), made once."""
    return _denoise(case_name, DenoiserOptions(scan_diffusion_loop=scan, stream_blocks=True))


def _denoise(case_name: str, options: DenoiserOptions, cache: CachePlan | None = None) -> np.ndarray:
    case = CASES[case_name]
    denoiser = JaxDenoiser(case_experts(case), options)
    latents, context, negative = case_inputs()
    plan = case_plan(case.experts, STEPS)
    plan = plan if cache is None else attrs.evolve(plan, cache=cache)
    session = denoiser.session(plan, context, negative)
    session.prepare(latents, case.conditioning)
    return np.asarray(session.denoise(latents, conditioning=case.conditioning).latents)


@pytest.mark.parametrize("name", ["t2v", "two-experts", "i2v"])
@pytest.mark.parametrize("scan", [False, True], ids=["python-loop", "scan-loop"])
def test_streamed_blocks_give_the_resident_latents_bit_for_bit(name, scan):
    np.testing.assert_array_equal(_streamed(name, scan), _resident(name, scan))


def test_the_streamed_kv_cache_equals_the_resident_one_bit_for_bit():
    """Both compute each block's text and image K/V as that block's own dots (on CPU without
    YNNPACK, one dot over all blocks' weights at once rounds differently: the cause when the
    latents above differ and this fails too)."""
    case = CASES["i2v"]
    latents, context, negative = case_inputs()
    caches = [
        JaxDenoiser(case_experts(case), DenoiserOptions(stream_blocks=stream)).program.inputs(
            latents.shape, context, negative, case.conditioning
        ).text
        for stream in (False, True)
    ]
    for resident, streamed in zip(jax.tree.leaves(caches[0]), jax.tree.leaves(caches[1]), strict=True):
        np.testing.assert_array_equal(streamed, resident)


@pytest.mark.parametrize("name", ["t2v", "two-experts", "i2v"])
@pytest.mark.parametrize("scan", [False, True], ids=["python-loop", "scan-loop"])
def test_experts_off_the_device_give_the_resident_latents_bit_for_bit(name, scan):
    """offload=components: each expert moved to the device for its own steps (the scan loop runs
    each expert's steps as a scan of their own, the cache state carried across)."""
    moved = DenoiserOptions(scan_diffusion_loop=scan, experts_off_device=True)
    np.testing.assert_array_equal(_denoise(name, moved), _resident(name, scan))


@pytest.mark.parametrize("scan", [False, True], ids=["python-loop", "scan-loop"])
def test_components_and_layers_together_give_the_streamed_latents(scan):
    """offload=all: moving the experts on and off the device changes nothing of what layers computes."""
    both = DenoiserOptions(scan_diffusion_loop=scan, experts_off_device=True, stream_blocks=True)
    np.testing.assert_array_equal(_denoise("two-experts", both), _streamed("two-experts", scan))


def test_one_expert_at_a_time_is_on_the_device_and_none_after_the_run():
    case = CASES["two-experts"]
    denoiser = JaxDenoiser(case_experts(case), DenoiserOptions(experts_off_device=True))
    program = denoiser.program
    kinds = {a.sharding.memory_kind for params in program.params for a in jax.tree.leaves(params)}
    assert kinds == {HOST_MEMORY}
    working = program.working(1)
    assert {a.sharding.memory_kind for a in jax.tree.leaves(working)} == {"device"}
    assert program.working(1) is working  # the same copy while that expert works
    latents, context, negative = case_inputs()
    plan = case_plan(2, STEPS)
    at_work = []
    denoiser.session(plan, context, negative).denoise(latents, on_step=lambda i, n: at_work.append(program.expert_at_work))
    assert at_work == list(plan.experts) and set(at_work) == {0, 1}
    assert program.expert_at_work is None


def test_an_animate_model_streams_its_blocks_beside_its_face_adapters():
    """The face adapters stay on the device and run between streamed blocks, bit for bit as resident."""
    streamed, resident = (_denoise("animate", DenoiserOptions(stream_blocks=stream)) for stream in (True, False))
    np.testing.assert_array_equal(streamed, resident)


def _flags(*steps: int) -> np.ndarray:
    return np.isin(np.arange(STEPS), steps)


CACHE_PLANS = {  # each policy's device path, on fixed schedules (the decisions are tested elsewhere)
    "magcache": CachePlan.of(STEPS, MagCachePlan(reuse_residual=_flags(2))),
    "cfg_cache": CachePlan.of(
        STEPS, CfgCachePlan(cond_only=_flags(2), cfg_weights=np.tile(np.float32([1.2, 1.0]), (STEPS, 1)))
    ),
    "teacache": CachePlan.of(
        STEPS, TeaCachePlan(rule=TeaCacheRule(threshold=2.0, coefficients=(1.0, 0.0)), force_compute=_flags(0))
    ),
    "sencache": CachePlan.of(
        STEPS,
        SenCachePlan(rule=SenCacheRule(threshold=1e9, alpha_x=1.0, alpha_t=1.0, max_reuse=1), force_compute=_flags(0)),
    ),
    "dbcache": CachePlan.of(  # the blocks streamed in two ranges; threshold 1: every other step reuses
        STEPS,
        DBCachePlan(
            rule=DBCacheRule(first_blocks=1, last_blocks=0, threshold=1.0, max_cached=-1, max_continuous=1),
            force_compute=_flags(0),
        ),
    ),
}


@pytest.mark.parametrize("policy", list(CACHE_PLANS))
def test_every_cache_policy_streams_to_the_same_latents(policy):
    cache = CACHE_PLANS[policy]
    streamed = _denoise("t2v", DenoiserOptions(stream_blocks=True), cache)
    np.testing.assert_array_equal(streamed, _denoise("t2v", DenoiserOptions(), cache))


def test_without_the_kv_cache_the_cross_attention_streams_too():
    """The K/V computed in every step read the blocks' weights from host memory as well."""
    plain = DenoiserOptions(use_kv_cache=False)
    streamed = DenoiserOptions(use_kv_cache=False, stream_blocks=True)
    np.testing.assert_array_equal(_denoise("two-experts", streamed), _denoise("two-experts", plain))


def test_the_blocks_weights_and_only_they_move_to_host_memory():
    case = CASES["two-experts"]
    program = JaxDenoiser(case_experts(case), DenoiserOptions(stream_blocks=True)).program
    for params in program.params:
        kinds = {path[0].key: a.sharding.memory_kind for path, a in jax.tree_util.tree_leaves_with_path(params)}
        assert kinds["blocks"] == HOST_MEMORY and kinds["proj_out"] != HOST_MEMORY
        blocks = sum(a.nbytes for a in jax.tree.leaves(params["blocks"]))
        host = sum(a.nbytes for a in jax.tree.leaves(params) if a.sharding.memory_kind == HOST_MEMORY)
        assert host == blocks > 0


def _abstract_step_footprint(stream: bool) -> tuple[int, int, int]:
    """(device bytes of the compiled guided step of the Wan 2.1 1.3B architecture, bytes of all
    its blocks' weights, bytes of one block's): arguments outside host memory + XLA's temporaries
    + outputs, from `compiled.memory_analysis()`; nothing is materialised."""
    spec = WAN21_T2V_1_3B
    runtime = TransformerRuntime(dtype=jnp.float32, param_dtype=jnp.float32)
    abstract = nnx.eval_shape(lambda: WanTransformer(spec, runtime, rngs=nnx.Rngs(0)))
    graphdef, state = nnx.split(abstract)
    device = jax.devices()[0]
    where = lambda path: HOST_MEMORY if stream and path[0].key == "blocks" else "device"  # noqa: E731
    params = jax.tree_util.tree_map_with_path(
        lambda path, a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=SingleDeviceSharding(device, memory_kind=where(path))),
        state,
    )
    latents = jax.ShapeDtypeStruct((1, 1, 8, 8, spec.in_channels), jnp.float32)
    context = jax.ShapeDtypeStruct((2, 16, spec.text_dim), jnp.float32)
    text = jax.eval_shape(lambda p, c: nnx.merge(graphdef, p).cross_attention_kv(c), state, context)
    plan = case_plan(1, STEPS)
    values = StepValues(plan.solver.row(0), plan.timesteps[0], plan.guidance_scales[0], np.int32(0))
    rope = abstract.rope_tables(latents.shape)
    step = Step(params, values, NO_CACHE, text, Conditioning(), rope)
    solver = jax.eval_shape(plan.solver.initial_state, latents)
    model = StepModel(graphdef, stream_blocks=stream)
    compiled = jax.jit(lambda *args: denoise_step(model, *args), keep_unused=True).lower(step, solver, CacheState()).compile()
    stats = compiled.memory_analysis()
    host = sum(a.size * a.dtype.itemsize for a in jax.tree.leaves(params) if a.sharding.memory_kind == HOST_MEMORY)
    device = stats.argument_size_in_bytes - host + stats.temp_size_in_bytes + stats.output_size_in_bytes
    blocks = sum(a.size * a.dtype.itemsize for a in jax.tree.leaves(state["blocks"]))
    return device, blocks, blocks // spec.num_layers


def test_the_compiled_step_holds_about_two_blocks_of_weights_on_the_device():
    """Wan 2.1 1.3B (30 blocks of 177 MiB in fp32, 16 tokens): resident, the step's device memory
    holds every block (measured 5584 MiB, the blocks 5315); streamed, the rest of the model, the
    activations and the blocks in flight (measured 490 MiB: 270 without any block, + 1.2 blocks)."""
    resident, blocks, block = _abstract_step_footprint(stream=False)
    streamed, _, _ = _abstract_step_footprint(stream=True)
    assert resident >= blocks
    assert streamed <= resident - blocks + 2.5 * block
