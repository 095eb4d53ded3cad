"""The whole denoising loop as one `jax.lax.scan` (config `scan_diffusion_loop`).

The scan runs over the plan's per-step arrays (solver rows, timesteps, guidance scales,
expert indices) and carries the solver state; Wan 2.2's expert switch is a `lax.switch`
on the step's expert index, each branch running the shared step with its own expert's
weights and text K/V. One dispatch runs all S steps, with no host round trip between
them; the price is no per-step progress, and a new step count compiles a new loop (the
Python loop, the default, compiles once for any step count).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
from flax import nnx

from wanjax.adapters.jax.denoise_step import StepInputs, guided_step
from wanjax.domain.plan import SamplingPlan
from wanjax.domain.scheduling import SolverState, StepCoefficients


class PlanArrays(NamedTuple):
    """A SamplingPlan's per-step values, stacked for `lax.scan`: [S] each ([S, K] in the rows)."""

    rows: StepCoefficients
    timesteps: jax.Array  # [S] float32
    guidance_scales: jax.Array  # [S] float32
    experts: jax.Array  # [S] int32

    @classmethod
    def of(cls, plan: SamplingPlan) -> PlanArrays:
        return cls(
            rows=jax.tree.map(jnp.asarray, plan.solver.coefficients),
            timesteps=jnp.asarray(plan.timesteps, jnp.float32),
            guidance_scales=jnp.asarray(plan.guidance_scales, jnp.float32),
            experts=jnp.asarray(plan.experts, jnp.int32),
        )


def scan_denoise(
    graphdef: nnx.GraphDef,
    params: Sequence[nnx.State],
    state: SolverState,
    steps: PlanArrays,
    inputs: StepInputs,
) -> SolverState:
    """All steps of `steps` from `state`; params[e] and inputs.text[e] belong to expert e."""

    def expert_step(expert: int, state: SolverState, row, timestep, scale) -> SolverState:
        # Rebuilt here: nnx's transforms (the layer scan) refuse Variables made in an outer trace.
        weights = jax.tree.map(lambda a: a, params[expert])
        return guided_step(
            graphdef, weights, state, row, timestep, scale, inputs.text[expert], inputs.conditioning, inputs.rope
        )

    branches = [functools.partial(expert_step, e) for e in range(len(params))]

    def body(state: SolverState, step: tuple) -> tuple[SolverState, None]:
        row, timestep, scale, expert = step
        return jax.lax.switch(expert, branches, state, row, timestep, scale), None

    state, _ = jax.lax.scan(body, state, (steps.rows, steps.timesteps, steps.guidance_scales, steps.experts))
    return state
