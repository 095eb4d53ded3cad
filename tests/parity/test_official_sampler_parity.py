"""The default sampler against the Wan team's own code (`wan22`): grids, expert split, steps.

The official pipelines (wan/text2video.py, image2video.py, textimage2video.py) build
FlowUniPCMultistepScheduler(shift=1) and call set_timesteps(N, shift=shift) for `unipc`, and
hand FlowDPMSolverMultistepScheduler(shift=1) the sigmas of get_sampling_sigmas(N, shift)
through retrieve_timesteps for `dpm++`; then they call step(noise_pred, t, latents) once per
timestep, with no begin index. These tests do exactly that, on the same synthetic model
outputs as the tables' `solver_step` loop.

Tolerances: timesteps and sigmas equal exactly. Trajectories in float32 within 1e-5 of
max|ref| (measured worst case over this grid: 1.1e-6; both sides round the weights
differently, the official code evaluating them in float32); UniPC in float64 within 1e-12
(the official dpm++ step casts the sample to float32, so it has no float64 run).
"""

from __future__ import annotations

import importlib

import numpy as np
import pytest
import torch

from official_wan import official_pipeline, official_wan
from wanjax.domain.config import GenerationConfig
from wanjax.domain.plan import HIGH_NOISE, LOW_NOISE, plan_sampling
from wanjax.domain.scheduling import SolverTable, dpm_table, solver_step, unipc_table

STEPS = (1, 2, 3, 4, 5, 10, 14, 19, 28, 38, 40, 42, 50, 56, 57)
SHIFTS = (1.0, 3.0, 5.0, 8.0, 12.0)
FLOAT32_RTOL = 1e-5
FLOAT64_RTOL = 1e-12

# (pipeline, config): Wan 2.2 A14B T2V (boundary 0.875, shift 12) and I2V (boundary 0.900,
# shift 5), with the step counts where the diffusers grid gives the high-noise expert one
# step more than the official grid does (and 40, the configs' default, where it does not).
A14B_SPLITS = [
    ("wan.text2video.WanT2V", "t2v_A14B", (19, 38, 57, 40)),
    ("wan.image2video.WanI2V", "i2v_A14B", (14, 28, 42, 56, 40)),
]


def _official(name: str):
    official_wan()
    return importlib.import_module(name)


def _official_unipc(num_steps: int, shift: float):
    """The scheduler and timesteps as the official pipelines make them for `unipc`."""
    scheduler = _official("wan.utils.fm_solvers_unipc").FlowUniPCMultistepScheduler(
        num_train_timesteps=1000, shift=1, use_dynamic_shifting=False
    )
    scheduler.set_timesteps(num_steps, device="cpu", shift=shift)
    return scheduler, scheduler.timesteps


def _official_dpm(num_steps: int, shift: float):
    """The scheduler and timesteps as the official pipelines make them for `dpm++`."""
    solvers = _official("wan.utils.fm_solvers")
    scheduler = solvers.FlowDPMSolverMultistepScheduler(num_train_timesteps=1000, shift=1, use_dynamic_shifting=False)
    sigmas = solvers.get_sampling_sigmas(num_steps, shift)
    timesteps, _ = solvers.retrieve_timesteps(scheduler, device="cpu", sigmas=sigmas)
    return scheduler, timesteps


OFFICIAL = {"unipc": (_official_unipc, unipc_table), "dpm++": (_official_dpm, dpm_table)}


def _velocity(sample: np.ndarray, timestep: float) -> np.ndarray:
    """A nonlinear, deterministic stand-in for the transformer, evaluated in float64."""
    x = sample.astype(np.float64)
    return (np.tanh(x) * (float(timestep) / 1000.0) + 0.1 * x).astype(sample.dtype)


def _latents(dtype: type) -> np.ndarray:
    return np.random.default_rng(0).standard_normal((1, 4, 3, 5, 6)).astype(dtype)


def _run_official(scheduler, timesteps, latents: np.ndarray) -> np.ndarray:
    """Every intermediate sample [S, ...], stepped as the official loop steps."""
    sample = torch.from_numpy(latents.copy())
    trajectory = []
    for t in timesteps:
        velocity = torch.from_numpy(_velocity(sample.numpy(), t.item()))
        sample = scheduler.step(velocity, t, sample, return_dict=False)[0]
        trajectory.append(sample.numpy().copy())
    return np.stack(trajectory)


def _run_table(table: SolverTable, latents: np.ndarray) -> np.ndarray:
    state = table.initial_state(latents.copy())
    trajectory = []
    for i in range(table.num_steps):
        state = solver_step(state, _velocity(state.sample, table.timesteps[i]), table.row(i))
        trajectory.append(state.sample)
    return np.stack(trajectory)


@pytest.mark.parametrize("shift", SHIFTS)
@pytest.mark.parametrize("num_steps", STEPS)
@pytest.mark.parametrize("solver", sorted(OFFICIAL))
def test_grid_is_the_official_schedulers(solver: str, num_steps: int, shift: float) -> None:
    make_official, make_table = OFFICIAL[solver]
    scheduler, timesteps = make_official(num_steps, shift)
    table = make_table(num_steps, shift)
    assert timesteps.dtype == torch.int64
    np.testing.assert_array_equal(table.timesteps, timesteps.numpy().astype(np.float32))
    np.testing.assert_array_equal(table.sigmas, scheduler.sigmas.numpy())


@pytest.mark.parametrize("shift", SHIFTS)
@pytest.mark.parametrize("num_steps", (1, 2, 3, 5, 10, 19, 50))
@pytest.mark.parametrize("solver", sorted(OFFICIAL))
def test_float32_run_follows_the_official_scheduler(solver: str, num_steps: int, shift: float) -> None:
    make_official, make_table = OFFICIAL[solver]
    latents = _latents(np.float32)
    reference = _run_official(*make_official(num_steps, shift), latents)
    trajectory = _run_table(make_table(num_steps, shift), latents)
    assert trajectory.dtype == np.float32
    error = np.abs(trajectory.astype(np.float64) - reference).max()
    assert error <= FLOAT32_RTOL * np.abs(reference).max()


@pytest.mark.parametrize("shift", (3.0, 12.0))
@pytest.mark.parametrize("num_steps", (2, 5, 40))
def test_unipc_weights_are_exact_in_float64(num_steps: int, shift: float) -> None:
    """The official UniPC derives its weights from its sigmas: given them in float64, its run
    and the float64 table's may differ by rounding noise only."""
    scheduler, timesteps = _official_unipc(num_steps, shift)
    scheduler.sigmas = scheduler.sigmas.double()
    latents = _latents(np.float64)
    reference = _run_official(scheduler, timesteps, latents)
    trajectory = _run_table(unipc_table(num_steps, shift, dtype=np.float64), latents)
    np.testing.assert_allclose(trajectory, reference, rtol=0, atol=FLOAT64_RTOL)


def _official_experts(pipeline, timesteps) -> list[int]:
    """Which expert the official loop runs per timestep: its own `_prepare_model_for_timestep`,
    given the boundary as `generate` computes it."""
    boundary = pipeline.boundary * pipeline.num_train_timesteps
    chosen = [pipeline._prepare_model_for_timestep(t, boundary, offload_model=False) for t in timesteps]
    return [HIGH_NOISE if model is pipeline.high_noise_model else LOW_NOISE for model in chosen]


@pytest.mark.parametrize("solver", sorted(OFFICIAL))
@pytest.mark.parametrize("pipeline_class, config_name, step_counts", A14B_SPLITS)
def test_a14b_expert_split_is_the_official_loops(solver, pipeline_class, config_name, step_counts) -> None:
    config = getattr(_official(f"wan.configs.wan_{config_name}"), config_name)
    pipeline = official_pipeline(
        pipeline_class, boundary=config.boundary, num_train_timesteps=config.num_train_timesteps,
        high_noise_model=torch.nn.Linear(1, 1), low_noise_model=torch.nn.Linear(1, 1),
    )  # fmt: skip
    make_official = OFFICIAL[solver][0]
    for num_steps in step_counts:
        request = GenerationConfig.from_mapping(dict(height=64, width=64, num_frames=5)).request(
            "a cat", num_inference_steps=num_steps, flow_shift=config.sample_shift, sample_solver=solver
        )
        plan = plan_sampling(request, num_experts=2, model_boundary_ratio=config.boundary)
        _, timesteps = make_official(num_steps, config.sample_shift)
        assert list(plan.experts) == _official_experts(pipeline, timesteps), num_steps
        assert HIGH_NOISE in plan.experts and LOW_NOISE in plan.experts


@pytest.mark.parametrize("pipeline_class, config_name, step_counts", A14B_SPLITS)
def test_the_diffusers_grid_splits_those_step_counts_differently(pipeline_class, config_name, step_counts) -> None:
    """Why the default is `official`: at these step counts the diffusers grid runs the
    high-noise expert one step longer (and at 40 steps equally long)."""
    config = getattr(_official(f"wan.configs.wan_{config_name}"), config_name)
    base = GenerationConfig.from_mapping(dict(height=64, width=64, num_frames=5))
    for num_steps in step_counts:
        high = {}
        for schedule in ("official", "diffusers"):
            request = base.request("a cat", num_inference_steps=num_steps, flow_shift=config.sample_shift,
                                   sigma_schedule=schedule)  # fmt: skip
            experts = plan_sampling(request, num_experts=2, model_boundary_ratio=config.boundary).experts
            high[schedule] = int(np.sum(experts == HIGH_NOISE))
        assert high["diffusers"] - high["official"] == (0 if num_steps == 40 else 1), num_steps
