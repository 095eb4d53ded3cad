"""Video-to-video's cut schedule and noisy start against diffusers' WanVideoToVideoPipeline.

Diffusers is driven as that pipeline drives its scheduler: `set_timesteps(N)`, its own
`get_timesteps(N, timesteps, strength)`, the encoded video noised at the first kept
timestep (`add_noise` for UniPC, `scale_noise` for flow-match Euler), then `step` per kept
timestep with no begin index. wanjax: `first_denoising_step`, the table from that step, and
`noised_latents` at the table's first sigma. Both are driven by the same synthetic model.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from diffusers import FlowMatchEulerDiscreteScheduler, UniPCMultistepScheduler, WanVideoToVideoPipeline

from wanjax.domain.errors import InvalidRequestError
from wanjax.domain.scheduling import sampler_table, solver_step
from wanjax.domain.modes.video_to_video import first_denoising_step, noised_latents

FLOAT32_RTOL = 1e-5  # as test_scheduler_parity.py: float32 weights rounded differently


class _Pipeline:
    """What `WanVideoToVideoPipeline.get_timesteps` reads of its pipeline: the scheduler's order."""

    def __init__(self, scheduler) -> None:
        self.scheduler = scheduler


def _velocity(sample: np.ndarray, timestep: float) -> np.ndarray:
    x = sample.astype(np.float64)
    return (np.tanh(x) * (float(timestep) / 1000.0) + 0.1 * x).astype(sample.dtype)


def _diffusers_run(scheduler, num_steps: int, strength: float, video: np.ndarray, noise: np.ndarray):
    scheduler.set_timesteps(num_steps)
    timesteps, _ = WanVideoToVideoPipeline.get_timesteps(
        _Pipeline(scheduler), num_steps, scheduler.timesteps, strength, "cpu"
    )
    first = timesteps[:1]
    x0, eps = torch.from_numpy(video), torch.from_numpy(noise)
    if hasattr(scheduler, "add_noise"):
        sample = scheduler.add_noise(x0, eps, first)
    else:
        sample = scheduler.scale_noise(x0, first, eps)
    start = sample.numpy().copy()
    for t in timesteps:
        sample = scheduler.step(torch.from_numpy(_velocity(sample.numpy(), t.item())), t, sample).prev_sample
    return timesteps.numpy(), start, sample.numpy()


def _wanjax_run(solver: str, num_steps: int, shift: float, strength: float, video: np.ndarray, noise: np.ndarray):
    table = sampler_table(solver, "diffusers", num_steps, shift, first_step=first_denoising_step(num_steps, strength))
    start = noised_latents(video, noise, table.sigmas[0])
    state = table.initial_state(start)
    for i in range(table.num_steps):
        state = solver_step(state, _velocity(state.sample, table.timesteps[i]), table.row(i))
    return table.timesteps, start, state.sample


@pytest.mark.parametrize("solver", ("unipc", "euler"))
@pytest.mark.parametrize("shift", (3.0, 12.0))
@pytest.mark.parametrize(("num_steps", "strength"), [(4, 0.5), (10, 0.3), (10, 0.75), (50, 0.8), (50, 1.0), (7, 0.99)])
def test_cut_schedule_matches_diffusers(solver: str, shift: float, num_steps: int, strength: float) -> None:
    rng = np.random.default_rng(0)
    video, noise = (rng.standard_normal((1, 4, 3, 5, 6)).astype(np.float32) for _ in range(2))
    if solver == "unipc":
        scheduler = UniPCMultistepScheduler(prediction_type="flow_prediction", use_flow_sigmas=True, flow_shift=shift)
    else:
        scheduler = FlowMatchEulerDiscreteScheduler(shift=shift)
    timesteps, start, result = _diffusers_run(scheduler, num_steps, strength, video, noise)
    our_timesteps, our_start, ours = _wanjax_run(solver, num_steps, shift, strength, video, noise)
    np.testing.assert_array_equal(our_timesteps, timesteps.astype(np.float32))
    np.testing.assert_allclose(our_start, start, rtol=0, atol=1e-6)
    assert np.abs(ours - result).max() <= FLOAT32_RTOL * np.abs(result).max()


@pytest.mark.parametrize(("num_steps", "strength", "first"), [(10, 1.0, 0), (10, 0.8, 2), (6, 0.8, 2), (3, 0.5, 2), (5, 0.2, 4)])
def test_first_step_keeps_int_steps_times_strength(num_steps: int, strength: float, first: int) -> None:
    assert first_denoising_step(num_steps, strength) == first


def test_a_strength_that_keeps_no_step_is_refused() -> None:
    with pytest.raises(InvalidRequestError, match=r"keeps int\(4 \* 0.2\) = 0 steps; raise strength to at least 0.25"):
        first_denoising_step(4, 0.2)
