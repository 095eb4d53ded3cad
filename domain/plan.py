"""The sampling plan: everything about a denoising run that is known before any model runs."""

from __future__ import annotations

import attrs
import numpy as np

from wanjax.domain.caching import CachePlan, plan_cache
from wanjax.domain.errors import InvalidRequestError
from wanjax.domain.guidance import GuidanceScales
from wanjax.domain.requests import GenerationRequest
from wanjax.domain.scheduling import NUM_TRAIN_TIMESTEPS, SolverTable, few_step_euler_table, sampler_table
from wanjax.domain.modes.registry import requested_mode

HIGH_NOISE, LOW_NOISE = 0, 1  # expert indices: Wan 2.2's `transformer` and `transformer_2`


@attrs.frozen(eq=False)
class SamplingPlan:
    """Per step i of S: the solver row, the model's timestep, the expert and its guidance scale,
    and the cache action (`cache`, docs/caching.md; dense unless the request asks for a policy).

    `uses_guidance` decides whether the unconditional pass runs at all (a static choice
    for the device loop); the per-step scales and experts are plain values, so changing
    them never recompiles.
    """

    solver: SolverTable
    guidance_scales: np.ndarray  # [S] float32
    experts: np.ndarray  # [S] int32: HIGH_NOISE or LOW_NOISE
    uses_guidance: bool
    cache: CachePlan = attrs.field(default=attrs.Factory(lambda plan: CachePlan.dense(plan.num_steps), takes_self=True))

    @property
    def num_steps(self) -> int:
        return self.solver.num_steps

    @property
    def timesteps(self) -> np.ndarray:
        return self.solver.timesteps


def expert_per_step(timesteps: np.ndarray, boundary_ratio: float | None) -> np.ndarray:
    """The high-noise expert while t >= boundary_ratio * 1000, then the low-noise one.

    Compared exactly, in float64, as the Wan code compares `t.item() >= boundary`
    (diffusers compares in float32; the two differ only for a boundary_ratio * 1000 within
    float32 rounding, ~3e-5, of a timestep without being equal to it).
    """
    if boundary_ratio is None:
        return np.full(len(timesteps), HIGH_NOISE, dtype=np.int32)
    boundary = boundary_ratio * NUM_TRAIN_TIMESTEPS
    return np.where(np.asarray(timesteps, np.float64) >= boundary, HIGH_NOISE, LOW_NOISE).astype(np.int32)


def expert_per_step_index(num_steps: int, switch_step: int) -> np.ndarray:
    """The high-noise expert for steps before `switch_step`, then the low-noise one.

    Step-distilled A14B recipes (Wan2.2-Lightning, LightX2V `boundary_step_index`) split
    their few steps by index rather than by a boundary timestep.
    """
    if not 0 <= switch_step <= num_steps:
        raise InvalidRequestError(
            f"expert_switch_step={switch_step!r}: must be a step index in 0..{num_steps} for {num_steps} steps"
        )
    return np.where(np.arange(num_steps) < switch_step, HIGH_NOISE, LOW_NOISE).astype(np.int32)


def plan_sampling(
    request: GenerationRequest, *, num_experts: int = 1, model_boundary_ratio: float | None = None
) -> SamplingPlan:
    """The plan for `request` on a model with `num_experts` transformers (1, or 2 for Wan 2.2 A14B).
    A mode may skip the first steps (video-to-video runs the last steps its strength keeps)."""
    steps, shift = request.num_inference_steps, request.flow_shift
    if request.sample_timesteps is not None:
        steps = len(request.sample_timesteps)
    first = requested_mode(request).first_step(request, steps)
    if request.sample_timesteps is not None:
        solver = few_step_euler_table(request.sample_timesteps[first:], shift)
    else:
        solver = sampler_table(request.sample_solver, request.sigma_schedule, steps, shift, first_step=first)
    if num_experts == 1:
        for name in ("guidance_scale_low", "boundary_ratio", "expert_switch_step"):
            if getattr(request, name) is not None:
                raise InvalidRequestError(
                    f"{name}={getattr(request, name)!r}: this model has one transformer; "
                    f"{name} applies only to two-expert (Wan 2.2 A14B) models: leave it unset"
                )
        experts = expert_per_step(solver.timesteps, None)
    elif request.expert_switch_step is not None:
        if request.boundary_ratio is not None:
            raise InvalidRequestError(
                "boundary_ratio and expert_switch_step both choose where the low-noise expert starts; set one"
            )
        experts = expert_per_step_index(solver.num_steps, request.expert_switch_step)
    else:
        boundary = request.boundary_ratio if request.boundary_ratio is not None else model_boundary_ratio
        if boundary is None:
            raise InvalidRequestError(
                "boundary_ratio is unset and the checkpoint's model_index.json gives none; "
                "set it, e.g. --set boundary_ratio=0.875"
            )
        experts = expert_per_step(solver.timesteps, boundary)
    scales = GuidanceScales.of(request.guidance_scale, request.guidance_scale_low).per_step(experts)
    return SamplingPlan(
        solver=solver,
        guidance_scales=scales,
        experts=experts,
        uses_guidance=request.uses_guidance,
        cache=plan_cache(request.cache, experts, scales, uses_guidance=request.uses_guidance),
    )
