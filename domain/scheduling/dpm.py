"""The Wan code's `dpm++` sampler (multistep DPM-Solver++, Lu et al. 2022) as a `SolverTable`.

The official pipelines build FlowDPMSolverMultistepScheduler with its defaults,
solver_order=2, algorithm_type="dpmsolver++", solver_type="midpoint",
lower_order_final=True, final_sigmas_type="zero", no thresholding, and hand it the sigmas
of `dpm_flow_schedule`. With alpha = 1 - sigma, lambda = log(alpha / sigma) and the data
prediction d_j = x_j - sigma_j v_j, a step from node s to t (h = lambda_t - lambda_s) is

    first order:   x_t = (sigma_t / sigma_s) x_s + A d_s,                      A = alpha_t (1 - e^-h)
    second order:  x_t = (sigma_t / sigma_s) x_s + A d_s + (A / 2) (d_s - d_{s-1}) / r,
                   r = (lambda_s - lambda_{s-1}) / h  (the "midpoint" form).

The first step is first order (no history yet), the last one too (final sigma zero), every
other one second order. The grid starts at sigma = 1 (lambda = -inf), so step 1's r is
infinite and its difference term vanishes, as it does in the reference. No corrector: the
rows only fill the predictor fields. Weights are computed in float64 from the float32
sigmas the reference uses.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import DTypeLike

from wanjax.domain.scheduling.flow_sigmas import dpm_flow_schedule, log_snr
from wanjax.domain.scheduling.solver import SolverTable, StepCoefficients

WIDTH = 2
"""Data predictions a step combines: solver_order 2."""


def dpm_table(num_steps: int, shift: float, *, first_step: int = 0, dtype: DTypeLike = np.float32) -> SolverTable:
    """DPM-Solver++(2M) for `num_steps` model evaluations on the Wan code's dpm++ grid; from
    `first_step` on (video-to-video) as a fresh solver, first order on its first step."""
    schedule = dpm_flow_schedule(num_steps, shift).from_step(first_step)
    num_steps = schedule.num_steps
    sigmas = schedule.sigmas.astype(np.float64)
    lam = log_snr(sigmas)
    h = lam[1:] - lam[:-1]
    weight = -(1.0 - sigmas[1:]) * np.expm1(-h)  # A per step
    predictor_coefs = np.zeros((num_steps, WIDTH))
    predictor_coefs[:, 0] = weight
    for i in range(1, num_steps - 1):
        difference = 0.5 * weight[i] * h[i] / (lam[i] - lam[i - 1])  # (A / 2) / r
        predictor_coefs[i] = (weight[i] + difference, -difference)
    return SolverTable(
        schedule=schedule,
        coefficients=StepCoefficients(
            sigma=sigmas[:-1],
            sample_coef=np.ones(num_steps),
            last_coef=np.zeros(num_steps),
            corrector_coefs=np.zeros((num_steps, WIDTH)),
            corrected_coef=sigmas[1:] / sigmas[:-1],
            predictor_coefs=predictor_coefs,
        ).astype(dtype),
    )
