"""The sampling plan: everything about a denoising run that is known before any model runs."""

from __future__ import annotations

import attrs
import numpy as np

from wanjax.domain.requests import GenerationRequest
from wanjax.domain.scheduling import SolverTable, euler_table, unipc_table


@attrs.frozen(eq=False)
class SamplingPlan:
    """Per step i of S: the solver row, the model's timestep, and the guidance scale.

    `uses_guidance` decides whether the unconditional pass runs at all (a static choice
    for the device loop); the per-step scales are traced values, so changing them never
    recompiles.
    """

    solver: SolverTable
    guidance_scales: np.ndarray  # [S] float32
    uses_guidance: bool

    @property
    def num_steps(self) -> int:
        return self.solver.num_steps

    @property
    def timesteps(self) -> np.ndarray:
        return self.solver.timesteps


def plan_sampling(request: GenerationRequest) -> SamplingPlan:
    steps, shift = request.num_inference_steps, request.flow_shift
    if request.sample_solver == "euler":
        solver = euler_table(steps, shift)
    else:
        solver = unipc_table(steps, shift)
    scales = np.full(steps, request.guidance_scale, dtype=np.float32)
    return SamplingPlan(solver=solver, guidance_scales=scales, uses_guidance=request.uses_guidance)
