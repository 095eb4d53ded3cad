"""Sampling schedules and solver tables: everything about a denoising loop that is data-free."""

from wanjax.domain.scheduling.choice import SOLVERS, check_sampler, sampler_table
from wanjax.domain.scheduling.dpm import dpm_table
from wanjax.domain.scheduling.euler import euler_table, euler_table_on
from wanjax.domain.scheduling.few_step import checked_timesteps, few_step_euler_table, few_step_schedule
from wanjax.domain.scheduling.flow_sigmas import (
    MAX_INFERENCE_STEPS,
    NUM_TRAIN_TIMESTEPS,
    SIGMA_SCHEDULES,
    FlowSchedule,
    dpm_flow_schedule,
    euler_flow_schedule,
    shift_sigmas,
    unipc_flow_schedule,
)
from wanjax.domain.scheduling.solver import (
    SolverState,
    SolverTable,
    StepCoefficients,
    solver_step,
)
from wanjax.domain.scheduling.unipc import unipc_table

__all__ = [
    "MAX_INFERENCE_STEPS",
    "NUM_TRAIN_TIMESTEPS",
    "SIGMA_SCHEDULES",
    "SOLVERS",
    "FlowSchedule",
    "SolverState",
    "SolverTable",
    "StepCoefficients",
    "check_sampler",
    "checked_timesteps",
    "dpm_flow_schedule",
    "dpm_table",
    "euler_flow_schedule",
    "euler_table",
    "euler_table_on",
    "few_step_euler_table",
    "few_step_schedule",
    "sampler_table",
    "shift_sigmas",
    "solver_step",
    "unipc_flow_schedule",
    "unipc_table",
]
