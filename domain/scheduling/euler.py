"""Flow-matching Euler (diffusers' FlowMatchEulerDiscreteScheduler) as a `SolverTable`.

x_{i+1} = x_i + (sigma_{i+1} - sigma_i) v_i, rewritten over d_i = x_i - sigma_i v_i as
(sigma_{i+1} / sigma_i) x_i + (1 - sigma_{i+1} / sigma_i) d_i: width 1, no corrector.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import DTypeLike

from wanjax.domain.scheduling.flow_sigmas import FlowSchedule, euler_flow_schedule
from wanjax.domain.scheduling.solver import SolverTable, StepCoefficients


def euler_table(num_steps: int, shift: float, *, first_step: int = 0, dtype: DTypeLike = np.float32) -> SolverTable:
    """Euler for `num_steps` model evaluations on the (static) flow grid shifted by `shift`,
    from step `first_step` on (video-to-video)."""
    return euler_table_on(euler_flow_schedule(num_steps, shift).from_step(first_step), dtype=dtype)


def euler_table_on(schedule: FlowSchedule, *, dtype: DTypeLike = np.float32) -> SolverTable:
    """Euler over any schedule (the static grid, or an explicit few-step list).

    Weights are computed in float64 and stored as `dtype`, the dtype the loop runs in.
    """
    sigmas = schedule.sigmas.astype(np.float64)
    ratio = sigmas[1:] / sigmas[:-1]
    steps = schedule.num_steps
    return SolverTable(
        schedule=schedule,
        coefficients=StepCoefficients(
            sigma=sigmas[:-1],
            sample_coef=np.ones(steps),
            last_coef=np.zeros(steps),
            corrector_coefs=np.zeros((steps, 1)),
            corrected_coef=ratio,
            predictor_coefs=(1.0 - ratio)[:, None],
        ).astype(dtype),
    )
