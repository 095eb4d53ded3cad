"""Sampling plans: experts and guidance per step, and the choices that do not fit the model."""

import numpy as np
import pytest

from wanjax.domain.config import GenerationConfig
from wanjax.domain.errors import InvalidRequestError
from wanjax.domain.plan import HIGH_NOISE, LOW_NOISE, expert_per_step, plan_sampling
from wanjax.domain.scheduling import dpm_table, euler_table, unipc_table


def _request(**overrides):
    return GenerationConfig.from_mapping(dict(height=64, width=64, num_frames=5)).request("a cat", **overrides)


def test_single_expert_plan_uses_unipc_by_default():
    plan = plan_sampling(_request(num_inference_steps=7, flow_shift=5.0))
    np.testing.assert_array_equal(plan.timesteps, unipc_table(7, 5.0).timesteps)
    assert (plan.experts == HIGH_NOISE).all()
    assert (plan.guidance_scales == 5.0).all()


def test_euler_solver_is_selectable():
    plan = plan_sampling(_request(num_inference_steps=4, sample_solver="euler"))
    np.testing.assert_array_equal(plan.timesteps, euler_table(4, 3.0).timesteps)


def test_sigma_schedule_chooses_the_unipc_grid():
    plan = plan_sampling(_request(num_inference_steps=19, flow_shift=12.0, sigma_schedule="diffusers"))
    np.testing.assert_array_equal(plan.timesteps, unipc_table(19, 12.0, sigma_schedule="diffusers").timesteps)
    assert not np.array_equal(plan.timesteps, unipc_table(19, 12.0).timesteps)


def test_dpm_solver_is_selectable():
    plan = plan_sampling(_request(num_inference_steps=6, flow_shift=5.0, sample_solver="dpm++"))
    np.testing.assert_array_equal(plan.timesteps, dpm_table(6, 5.0).timesteps)
    assert plan.solver.width == 2 and plan.timesteps[0] == 1000


def test_expert_boundary_is_compared_exactly_as_the_official_loop():
    """`t.item() >= boundary` on Python numbers: timestep 900 is below 900.00001, which float32
    (the timesteps' dtype) would round to 900."""
    timesteps = np.array([901, 900, 899], np.float32)
    assert list(expert_per_step(timesteps, 0.90000001)) == [HIGH_NOISE, LOW_NOISE, LOW_NOISE]
    assert list(expert_per_step(timesteps, 0.9)) == [HIGH_NOISE, HIGH_NOISE, LOW_NOISE]


def test_two_experts_switch_once_with_their_own_guidance():
    plan = plan_sampling(_request(num_inference_steps=10, guidance_scale=4.0, guidance_scale_low=3.0),
                         num_experts=2, model_boundary_ratio=0.875)  # fmt: skip
    switch = int(np.argmax(plan.experts == LOW_NOISE))
    assert switch > 0 and (plan.experts[:switch] == HIGH_NOISE).all() and (plan.experts[switch:] == LOW_NOISE).all()
    assert (plan.timesteps[:switch] >= 875).all() and (plan.timesteps[switch:] < 875).all()
    np.testing.assert_array_equal(plan.guidance_scales, np.where(plan.experts == HIGH_NOISE, 4.0, 3.0))


def test_request_boundary_overrides_the_checkpoint():
    ours = plan_sampling(_request(num_inference_steps=10, boundary_ratio=0.5), num_experts=2, model_boundary_ratio=0.875)
    np.testing.assert_array_equal(ours.experts, expert_per_step(ours.timesteps, 0.5))


def test_low_guidance_defaults_to_the_high_one():
    plan = plan_sampling(_request(num_inference_steps=10, guidance_scale=6.0), num_experts=2, model_boundary_ratio=0.875)
    assert (plan.guidance_scales == 6.0).all()


@pytest.mark.parametrize("field, value", [("guidance_scale_low", 2.0), ("boundary_ratio", 0.5)])
def test_expert_settings_on_a_single_expert_model_are_refused(field, value):
    with pytest.raises(InvalidRequestError, match=f"{field}=.*one transformer"):
        plan_sampling(_request(**{field: value}))


def test_two_experts_without_any_boundary_are_refused():
    with pytest.raises(InvalidRequestError, match="boundary_ratio is unset"):
        plan_sampling(_request(), num_experts=2)


@pytest.mark.parametrize("value", [0.0, 1.0, 1.5, -0.1])
def test_boundary_outside_zero_one_is_refused(value):
    with pytest.raises(InvalidRequestError, match="strictly between 0 and 1"):
        _request(boundary_ratio=value)
