"""The whole denoising loop as one `jax.lax.scan` (config `scan_diffusion_loop`).

The scan runs over the plan's per-step arrays (solver rows, timesteps, guidance scales,
expert indices, cache flags) and carries the solver state and the cache state; what each
step ran comes out as the scan's per-step output. Wan 2.2's expert switch is a `lax.switch`
on the step's expert index, each branch running the shared step with its own expert's
weights and text K/V. One dispatch runs all S steps, with no host round trip between
them; the price is no per-step progress, and a new step count compiles a new loop (the
Python loop, the default, compiles once for any step count).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
from flax import nnx

from wanjax.adapters.jax.denoising.caching.feature import CacheState, StepReport
from wanjax.adapters.jax.denoising.caching.state import CacheControls
from wanjax.adapters.jax.denoising.step import Step, StepInputs, StepModel, StepValues, denoise_step
from wanjax.domain.plan import SamplingPlan
from wanjax.domain.scheduling import SolverState, StepCoefficients


class PlanArrays(NamedTuple):
    """A SamplingPlan's per-step values, stacked for `lax.scan`: [S] each ([S, K] in the rows),
    and its cache plan's controls."""

    rows: StepCoefficients
    timesteps: jax.Array  # [S] float32
    guidance_scales: jax.Array  # [S] float32
    experts: jax.Array  # [S] int32
    cache: CacheControls

    @classmethod
    def of(cls, plan: SamplingPlan) -> PlanArrays:
        return cls(
            rows=jax.tree.map(jnp.asarray, plan.solver.coefficients),
            timesteps=jnp.asarray(plan.timesteps, jnp.float32),
            guidance_scales=jnp.asarray(plan.guidance_scales, jnp.float32),
            experts=jnp.asarray(plan.experts, jnp.int32),
            cache=CacheControls.of(plan.cache),
        )

    def segment(self, steps: slice) -> PlanArrays:
        """These steps' values alone (the cache feature's parameters are not per step)."""
        cut = lambda tree: jax.tree.map(lambda a: a[steps], tree)  # noqa: E731
        cache = dataclasses.replace(self.cache, steps=cut(self.cache.steps))
        return PlanArrays(cut(self.rows), cut(self.timesteps), cut(self.guidance_scales), cut(self.experts), cache)


def scan_denoise(
    model: StepModel,
    params: Sequence[nnx.State],
    state: SolverState,
    steps: PlanArrays,
    inputs: StepInputs,
    cache: CacheState,
) -> tuple[SolverState, CacheState, StepReport]:
    """All steps of `steps` from `state` and `cache`; params[e] and inputs.text[e] belong to
    expert e. Returns the final state and cache and what each step ran (fields [S])."""
    controls = steps.cache

    def expert_step(expert: int, carry: tuple[SolverState, CacheState], values: StepValues, step_controls):
        state, cache = carry
        step = Step.of(params[expert], values, step_controls, inputs, expert)
        state, cache, report = denoise_step(model, step, state, cache)
        return (state, cache), report

    branches = [functools.partial(expert_step, e) for e in range(len(params))]

    def body(carry: tuple[SolverState, CacheState], step: tuple) -> tuple[tuple[SolverState, CacheState], StepReport]:
        values, per_step = step
        step_controls = dataclasses.replace(controls, steps=per_step)
        return jax.lax.switch(values.expert, branches, carry, values, step_controls)

    values = StepValues(steps.rows, steps.timesteps, steps.guidance_scales, steps.experts)
    (state, cache), reports = jax.lax.scan(body, (state, cache), (values, controls.steps))
    return state, cache, reports
