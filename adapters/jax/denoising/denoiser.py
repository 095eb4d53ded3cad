"""The JAX denoiser: executes a SamplingPlan with the Wan transformer(s).

It runs a `DenoisingProgram` either as a Python loop over its one compiled step (per-step
progress; any step count, shift, guidance scale or expert switch runs without recompiling) or,
with `scan_diffusion_loop`, as its one compiled `lax.scan` over all steps. Both execute the
plan's `CachePlan` with the same step; each run returns its own report of what ran.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from wanjax.adapters.jax.denoising.caching.feature import CacheState, StepReport
from wanjax.adapters.jax.denoising.caching.report import run_report, stacked
from wanjax.adapters.jax.denoising.caching.state import CacheControls
from wanjax.adapters.jax.denoising.program import DenoiserOptions, DenoisingProgram
from wanjax.adapters.jax.denoising.scan_loop import PlanArrays
from wanjax.adapters.jax.denoising.step import StepInputs, with_first_frame
from wanjax.adapters.jax.transformer.model import WanTransformer
from wanjax.domain.conditioning import Conditioning
from wanjax.domain.errors import NumericalError
from wanjax.domain.plan import SamplingPlan
from wanjax.domain.ports import Denoised, StepCallback
from wanjax.domain.scheduling import SolverState


class JaxDenoiser:
    """Implements the Denoiser port on Wan transformers: one, or Wan 2.2's two experts (high noise first)."""

    def __init__(self, experts: Sequence[WanTransformer], options: DenoiserOptions = DenoiserOptions()) -> None:
        self.program = DenoisingProgram(experts, options)

    @property
    def num_compiled(self) -> int:
        """Denoising executables compiled so far: one per latent/context shape whatever the expert
        (and, with scan_diffusion_loop, per step count); the KV-cache builder is not counted."""
        return self.program.num_compiled

    def noise(self, seed: int, shape: tuple[int, ...]) -> jax.Array:
        return jax.random.normal(jax.random.key(seed), shape, dtype=jnp.float32)

    def prepare(
        self,
        latents: Any,
        plan: SamplingPlan,
        context: np.ndarray,
        negative_context: np.ndarray | None,
        conditioning: Conditioning = Conditioning(),
    ) -> None:
        program = self.program
        inputs = program.inputs(jnp.shape(latents), context, negative_context, conditioning, abstract=True)
        state = program.initial_state(plan, latents)
        controls = CacheControls.of(plan.cache)
        cache = program.initial_cache(controls, state.sample, inputs)
        if program.options.scan_diffusion_loop:
            steps = PlanArrays.of(plan)
            for expert, segment in program.loop_segments(plan):
                params = program.loop_params(expert, abstract=True)
                program.loop.prepare(params, state, steps.segment(segment), inputs, cache)
        else:
            program.step.prepare(*program.step_arguments(state, plan, 0, inputs, cache, controls, abstract=True))

    def denoise(
        self,
        latents: Any,
        plan: SamplingPlan,
        context: np.ndarray,
        negative_context: np.ndarray | None,
        on_step: StepCallback | None = None,
        conditioning: Conditioning = Conditioning(),
    ) -> Denoised:
        program = self.program
        with program.run():
            inputs = program.inputs(jnp.shape(latents), context, negative_context, conditioning)
            state = program.initial_state(plan, latents)
            controls = CacheControls.of(plan.cache)
            cache = program.initial_cache(controls, state.sample, inputs)
            if program.options.scan_diffusion_loop:
                state, report = self._scanned(plan, state, cache, inputs)
                if on_step is not None:
                    on_step(plan.num_steps, plan.num_steps)
            else:
                reports = []
                for i in range(plan.num_steps):
                    arguments = program.step_arguments(state, plan, i, inputs, cache, controls)
                    state, cache, step_report = program.step(*arguments)
                    reports.append(step_report)
                    if on_step is not None:  # told of a step once the device has finished it, not when dispatched
                        jax.block_until_ready(state.sample)
                        on_step(i + 1, plan.num_steps)
                report = stacked(reports)
        sample = with_first_frame(state.sample, inputs.conditioning.first_frame).astype(jnp.float32)
        if not bool(jnp.isfinite(sample).all()):
            raise NumericalError(
                "the denoised latents hold NaN or infinite values, so no video was made. Likely causes: the "
                "transformer's weights or a LoRA merged into them hold NaN/inf (re-download the checkpoint, "
                "check the LoRA), or the activations overflowed in bfloat16 (try --dtype float32)"
            )
        return Denoised(sample, run_report(report, plan.num_steps, plan.uses_guidance))

    def _scanned(
        self, plan: SamplingPlan, state: SolverState, cache: CacheState, inputs: StepInputs
    ) -> tuple[SolverState, StepReport]:
        """The plan as one compiled scan, or one per expert's run of steps where the experts move
        on and off the device between them; the cache state carries across."""
        program, steps, reports = self.program, PlanArrays.of(plan), []
        for expert, segment in program.loop_segments(plan):
            state, cache, report = program.loop(program.loop_params(expert), state, steps.segment(segment), inputs, cache)
            reports.append(report)
        return state, jax.tree.map(lambda *parts: jnp.concatenate(parts), *reports)
