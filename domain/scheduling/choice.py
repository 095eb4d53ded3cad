"""Which solver table a request samples with: `sample_solver` on its `sigma_schedule` grid.

`sigma_schedule` chooses between the two UniPC grids (docs/sampling.md). The other solvers
have one grid each, whatever it says: dpm++ exists only in the Wan code, so it runs on the
Wan code's dpm++ grid and refuses `diffusers`; euler is diffusers' FlowMatchEulerDiscrete
(the Wan code has no Euler) and keeps that scheduler's grid under either value.
"""

from __future__ import annotations

from wanjax.domain.errors import InvalidRequestError
from wanjax.domain.scheduling.dpm import dpm_table
from wanjax.domain.scheduling.euler import euler_table
from wanjax.domain.scheduling.flow_sigmas import SIGMA_SCHEDULES
from wanjax.domain.scheduling.solver import SolverTable
from wanjax.domain.scheduling.unipc import unipc_table

SOLVERS = ("unipc", "dpm++", "euler")


def check_sampler(solver: str, sigma_schedule: str) -> None:
    """InvalidRequestError unless `solver` is one of SOLVERS and can run on `sigma_schedule`."""
    if solver not in SOLVERS:
        raise InvalidRequestError(f"sample_solver={solver!r}: must be one of {', '.join(SOLVERS)}")
    if sigma_schedule not in SIGMA_SCHEDULES:
        raise InvalidRequestError(
            f"sigma_schedule={sigma_schedule!r}: must be one of {', '.join(SIGMA_SCHEDULES)}"
        )
    if solver == "dpm++" and sigma_schedule == "diffusers":
        raise InvalidRequestError(
            "sample_solver=dpm++ with sigma_schedule=diffusers: dpm++ is the Wan code's solver and "
            "diffusers' Wan pipelines have no such grid to reproduce; set sigma_schedule=official "
            "(the default), or sample_solver=unipc to reproduce a diffusers run"
        )


def sampler_table(
    solver: str, sigma_schedule: str, num_steps: int, shift: float, *, first_step: int = 0
) -> SolverTable:
    """The float32 table of `solver` for `num_steps` steps at `shift` (see the module docstring),
    run from step `first_step` of that grid (video-to-video; 0: all of it)."""
    check_sampler(solver, sigma_schedule)
    if solver == "dpm++":
        return dpm_table(num_steps, shift, first_step=first_step)
    if solver == "euler":
        return euler_table(num_steps, shift, first_step=first_step)
    return unipc_table(num_steps, shift, sigma_schedule=sigma_schedule, first_step=first_step)
