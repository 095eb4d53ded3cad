"""Solver tables against diffusers' schedulers, both driven by the same synthetic model.

Diffusers runs the way WanPipeline drives it (set_timesteps, set_begin_index(0), then
step(model_output, t, sample) per timestep); the tables run through `solver_step`. The
UniPC schedulers are loaded from Wan's published scheduler_config.json files, so the
configuration the tables claim to match is the real one; the UniPC tables are built on
diffusers' grid (sigma_schedule="diffusers"). The default, official grid is checked
against the Wan code in test_official_sampler_parity.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from diffusers import FlowMatchEulerDiscreteScheduler, UniPCMultistepScheduler

from wanjax.domain.scheduling import SolverTable, euler_table, solver_step, unipc_table

# scheduler/scheduler_config.json of Wan-AI/Wan2.1-T2V-1.3B-Diffusers and of
# Wan-AI/Wan2.2-TI2V-5B-Diffusers, transcribed from public copies of those files.
WAN21_SCHEDULER_CONFIG = {
    "_class_name": "UniPCMultistepScheduler",
    "_diffusers_version": "0.33.0.dev0",
    "beta_end": 0.02, "beta_schedule": "linear", "beta_start": 0.0001,
    "disable_corrector": [], "dynamic_thresholding_ratio": 0.995,
    "final_sigmas_type": "zero", "flow_shift": 3.0, "lower_order_final": True,
    "num_train_timesteps": 1000, "predict_x0": True, "prediction_type": "flow_prediction",
    "rescale_betas_zero_snr": False, "sample_max_value": 1.0, "solver_order": 2,
    "solver_p": None, "solver_type": "bh2", "steps_offset": 0, "thresholding": False,
    "timestep_spacing": "linspace", "trained_betas": None, "use_beta_sigmas": False,
    "use_exponential_sigmas": False, "use_flow_sigmas": True, "use_karras_sigmas": False,
}  # fmt: skip
WAN22_SCHEDULER_CONFIG = {
    **WAN21_SCHEDULER_CONFIG,
    "flow_shift": 5.0, "time_shift_type": "exponential", "use_dynamic_shifting": False,
}  # fmt: skip

DIFFUSERS = "diffusers"  # the grid of diffusers >= 0.37's UniPC
STEPS = (1, 2, 3, 5, 10, 50)
SHIFTS = (1.0, 3.0, 5.0, 12.0)

# Both sides compute in float32 but round differently: diffusers evaluates the UniPC
# weights themselves in float32 (with cancellation in log-SNR differences), the tables
# evaluate them in float64 and round once. Measured worst case over this grid: 7e-7 of
# max|ref| (1.6e-6 at 200 steps); the float64 test below shows the math agrees to 4e-15.
# 1e-5 leaves headroom for other BLAS/CPU rounding yet fails on a subtly wrong weight
# (solving for UniP-2's fixed rho = 1/2 instead moves trajectories by ~2e-3).
FLOAT32_RTOL = 1e-5
FLOAT64_RTOL = 1e-12


def _velocity(sample: np.ndarray, timestep: float) -> np.ndarray:
    """A nonlinear, deterministic stand-in for the transformer, evaluated in float64."""
    x = sample.astype(np.float64)
    return (np.tanh(x) * (float(timestep) / 1000.0) + 0.1 * x).astype(sample.dtype)


def _latents(dtype: type = np.float32) -> np.ndarray:
    return np.random.default_rng(0).standard_normal((1, 4, 3, 5, 6)).astype(dtype)


def _run_diffusers(scheduler, num_steps: int, latents: np.ndarray, *, float64: bool = False):
    """Timesteps, sigmas and every intermediate sample [S, ...] of a diffusers run."""
    scheduler.set_timesteps(num_steps)
    scheduler.set_begin_index(0)
    if float64:  # UniPC derives its weights from these; float64 makes them exact
        scheduler.sigmas = scheduler.sigmas.double()
    sample = torch.from_numpy(latents.copy())
    trajectory = []
    for t in scheduler.timesteps:
        velocity = torch.from_numpy(_velocity(sample.numpy(), t.item()))
        sample = scheduler.step(velocity, t, sample).prev_sample
        trajectory.append(sample.numpy().copy())
    return scheduler.timesteps.numpy(), scheduler.sigmas.numpy(), np.stack(trajectory)


def _run_table(table: SolverTable, latents: np.ndarray) -> np.ndarray:
    state = table.initial_state(latents.copy())
    trajectory = []
    for i in range(table.num_steps):
        velocity = _velocity(state.sample, table.timesteps[i])
        state = solver_step(state, velocity, table.row(i))
        trajectory.append(state.sample)
    return np.stack(trajectory)


def _assert_parity(scheduler, table: SolverTable, rtol: float = FLOAT32_RTOL) -> None:
    latents = _latents()
    timesteps, sigmas, reference = _run_diffusers(scheduler, table.num_steps, latents)
    np.testing.assert_array_equal(table.timesteps, timesteps.astype(np.float32))
    np.testing.assert_allclose(table.sigmas, sigmas, rtol=0, atol=1e-6)
    trajectory = _run_table(table, latents)
    assert trajectory.dtype == np.float32
    error = np.abs(trajectory.astype(np.float64) - reference).max()
    assert error <= rtol * np.abs(reference).max()


@pytest.fixture(scope="module")
def wan_unipc(tmp_path_factory: pytest.TempPathFactory) -> UniPCMultistepScheduler:
    """The Wan 2.1 scheduler, loaded from a model folder the way WanPipeline loads it."""
    folder = tmp_path_factory.mktemp("wan21") / "scheduler"
    folder.mkdir()
    (folder / "scheduler_config.json").write_text(json.dumps(WAN21_SCHEDULER_CONFIG))
    return UniPCMultistepScheduler.from_pretrained(Path(folder).parent, subfolder="scheduler")


@pytest.mark.parametrize("order", (1, 2, 3))
@pytest.mark.parametrize("shift", SHIFTS)
@pytest.mark.parametrize("num_steps", STEPS)
def test_unipc_matches_diffusers(wan_unipc, num_steps: int, shift: float, order: int) -> None:
    # The override style of diffusers' own Wan example: from_config(config, flow_shift=...).
    scheduler = UniPCMultistepScheduler.from_config(
        wan_unipc.config, flow_shift=shift, solver_order=order
    )
    _assert_parity(scheduler, unipc_table(num_steps, shift, order=order, sigma_schedule=DIFFUSERS))


@pytest.mark.parametrize("shift", SHIFTS)
@pytest.mark.parametrize("num_steps", STEPS)
def test_euler_matches_diffusers(num_steps: int, shift: float) -> None:
    _assert_parity(FlowMatchEulerDiscreteScheduler(shift=shift), euler_table(num_steps, shift))


@pytest.mark.parametrize("config", (WAN21_SCHEDULER_CONFIG, WAN22_SCHEDULER_CONFIG))
def test_published_wan_configs_match_the_diffusers_grid_table(config: dict) -> None:
    scheduler = UniPCMultistepScheduler.from_config(config)
    assert scheduler.config.prediction_type == "flow_prediction"
    assert scheduler.config.use_flow_sigmas and scheduler.config.predict_x0
    _assert_parity(scheduler, unipc_table(50, config["flow_shift"], sigma_schedule=DIFFUSERS))


@pytest.mark.parametrize("disabled", ((0,), (1, 2, 5), tuple(range(10))))
@pytest.mark.parametrize("order", (1, 2, 3))
def test_unipc_disable_corrector_matches_diffusers(order: int, disabled: tuple[int, ...]) -> None:
    config = {**WAN21_SCHEDULER_CONFIG, "solver_order": order, "disable_corrector": list(disabled)}
    scheduler = UniPCMultistepScheduler.from_config(config)
    _assert_parity(scheduler, unipc_table(10, 3.0, order=order, disable_corrector=disabled, sigma_schedule=DIFFUSERS))


@pytest.mark.parametrize("order", (1, 2, 3))
@pytest.mark.parametrize("num_steps", (2, 5, 50))
def test_unipc_weights_are_exact_in_float64(num_steps: int, order: int) -> None:
    """With diffusers' weights and both runs in float64, only rounding noise may remain."""
    scheduler = UniPCMultistepScheduler.from_config(WAN21_SCHEDULER_CONFIG, solver_order=order)
    latents = _latents(np.float64)
    _, _, reference = _run_diffusers(scheduler, num_steps, latents, float64=True)
    table = unipc_table(num_steps, 3.0, order=order, sigma_schedule=DIFFUSERS, dtype=np.float64)
    trajectory = _run_table(table, latents)
    assert trajectory.dtype == np.float64
    np.testing.assert_allclose(trajectory, reference, rtol=0, atol=FLOAT64_RTOL)
