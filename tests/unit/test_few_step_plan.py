"""Few-step distilled plans: the steps, timesteps and experts the LightX2V / Lightning recipes run."""

import numpy as np
import pytest

from wanjax.application.presets import load_preset
from wanjax.domain.config import GenerationConfig
from wanjax.domain.errors import ConfigError, InvalidRequestError
from wanjax.domain.plan import HIGH_NOISE, LOW_NOISE, expert_per_step, plan_sampling
from wanjax.domain.scheduling import few_step_schedule, shift_sigmas

FOUR_STEPS = (1000, 750, 500, 250)


def _request(**overrides):
    return GenerationConfig.from_mapping(dict(height=64, width=64, num_frames=5)).request("a cat", **overrides)


def test_four_step_plan_at_shift_5():
    plan = plan_sampling(_request(sample_timesteps=FOUR_STEPS, flow_shift=5.0, guidance_scale=1.0))
    assert plan.num_steps == 4 and not plan.uses_guidance
    np.testing.assert_allclose(plan.timesteps, [1000, 937.5, 2500 / 3, 625], rtol=1e-7)
    np.testing.assert_allclose(plan.solver.sigmas, [1, 0.9375, 2.5 / 3, 0.625, 0], rtol=1e-7)
    assert (plan.experts == HIGH_NOISE).all()


def test_timesteps_replace_steps_and_solver():
    plan = plan_sampling(_request(sample_timesteps=FOUR_STEPS, num_inference_steps=50, sample_solver="unipc"))
    assert plan.num_steps == 4 and plan.solver.width == 1  # Euler


def test_lightx2v_grid_lookup_agrees_to_one_ulp():
    """LightX2V's WanStepDistillScheduler: the shifted 1000-point grid linspace(1, 0, 1001)[:-1],
    indexed at 1000 - t (float32 throughout)."""
    grid = shift_sigmas(np.linspace(1, 0, 1001, dtype=np.float32)[:-1], 5.0)
    theirs = grid[[1000 - t for t in FOUR_STEPS]]
    np.testing.assert_array_max_ulp(few_step_schedule(FOUR_STEPS, 5.0).sigmas[:-1], theirs, maxulp=1)


def test_lightning_euler_grid_agrees_to_one_ulp():
    """Wan2.2-Lightning's EulerScheduler: linspace(1000, 0, steps + 1) in float32, / 1000, shifted."""
    theirs = shift_sigmas(np.linspace(1000, 0, 5, dtype=np.float32) / np.float32(1000), 5.0)
    np.testing.assert_array_max_ulp(few_step_schedule(FOUR_STEPS, 5.0).sigmas, theirs, maxulp=1)


def test_a14b_split_by_step_index_matches_the_boundary_split():
    """Lightning switches experts at boundary 0.875 on the shifted timesteps; LightX2V at
    boundary_step_index 2: the same two and two."""
    request = _request(sample_timesteps=FOUR_STEPS, flow_shift=5.0, expert_switch_step=2, guidance_scale=1.0)
    plan = plan_sampling(request, num_experts=2, model_boundary_ratio=0.875)
    np.testing.assert_array_equal(plan.experts, [HIGH_NOISE, HIGH_NOISE, LOW_NOISE, LOW_NOISE])
    np.testing.assert_array_equal(plan.experts, expert_per_step(plan.timesteps, 0.875))


@pytest.mark.parametrize("switch, experts", [(0, [1, 1, 1, 1]), (3, [0, 0, 0, 1]), (4, [0, 0, 0, 0])])
def test_switch_step_edges(switch, experts):
    plan = plan_sampling(_request(sample_timesteps=FOUR_STEPS, expert_switch_step=switch), num_experts=2)
    np.testing.assert_array_equal(plan.experts, experts)


def test_presets_give_the_published_plans():
    lightx2v = load_preset("wan2.1-t2v-14b-lightx2v-4step")
    plan = plan_sampling(lightx2v.request("a cat"))
    assert (lightx2v.sampling.height, lightx2v.sampling.width, lightx2v.sampling.flow_shift) == (480, 832, 5.0) and not plan.uses_guidance
    np.testing.assert_allclose(plan.timesteps, [1000, 937.5, 2500 / 3, 625], rtol=1e-7)
    lightning = load_preset("wan2.2-t2v-a14b-lightning-4step")
    plan = plan_sampling(lightning.request("a cat"), num_experts=2, model_boundary_ratio=0.875)
    assert (lightning.sampling.height, lightning.sampling.width) == (720, 1280) and not plan.uses_guidance
    np.testing.assert_array_equal(plan.experts, [0, 0, 1, 1])
    np.testing.assert_allclose(plan.timesteps, [1000, 937.5, 2500 / 3, 625], rtol=1e-7)


@pytest.mark.parametrize("value", [(1000, 1000), (250, 500), (1200, 500), (500, 0), (), ("a",), (True,)])
def test_bad_timestep_lists_are_refused(value):
    with pytest.raises(InvalidRequestError, match="sample_timesteps=.*strictly decreasing"):
        _request(sample_timesteps=value)


def test_bad_switch_steps_are_refused():
    with pytest.raises(InvalidRequestError, match="expert_switch_step=5: must be a step index in 0..4"):
        plan_sampling(_request(sample_timesteps=FOUR_STEPS, expert_switch_step=5), num_experts=2)
    with pytest.raises(InvalidRequestError, match="expert_switch_step=2: this model has one transformer"):
        plan_sampling(_request(expert_switch_step=2))
    with pytest.raises(InvalidRequestError, match="set one"):
        plan_sampling(_request(expert_switch_step=2, boundary_ratio=0.9), num_experts=2)
    with pytest.raises(InvalidRequestError, match="step index from 0 to 1000"):
        _request(expert_switch_step=-1)


def test_config_keys_parse_from_text():
    config = GenerationConfig().with_overrides({"sample_timesteps": "1000, 750,500,250", "expert_switch_step": "2"})
    assert config.sampling.sample_timesteps == (1000.0, 750.0, 500.0, 250.0) and config.sampling.expert_switch_step == 2
    assert GenerationConfig().with_overrides({"sample_timesteps": "none"}).sampling.sample_timesteps is None
    with pytest.raises(ConfigError, match="comma-separated list of float"):
        GenerationConfig().with_overrides({"sample_timesteps": "1000,x"})
