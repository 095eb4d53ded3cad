"""One request's denoising session: the runs of a plan over the same prompts (one run, or a mode's
segments, each given the previous one's frames), sharing what does not change between them.

The text rows and their cross-attention K/V (and the image context's), the RoPE tables of each
latent shape and the shapes the compiler was asked for are made at the first run that needs them
(`KeptInputs`) and reused by the next; the executables are the program's, compiled once per
argument shapes, so windows of one shape compile nothing after the first.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from wanjax.adapters.jax.denoising.caching.feature import CacheState, StepReport
from wanjax.adapters.jax.denoising.caching.report import run_report, stacked
from wanjax.adapters.jax.denoising.caching.state import CacheControls
from wanjax.adapters.jax.denoising.program import DenoisingProgram, KeptInputs
from wanjax.adapters.jax.denoising.scan_loop import PlanArrays
from wanjax.adapters.jax.denoising.step import StepInputs, with_first_frame
from wanjax.domain.conditioning import Conditioning
from wanjax.domain.errors import NumericalError
from wanjax.domain.plan import SamplingPlan
from wanjax.domain.ports import Denoised, StepCallback
from wanjax.domain.scheduling import SolverState


class JaxDenoisingSession:
    """Implements the DenoisingSession port: `plan` run by `program` as often as the request asks,
    compiled for `compiled_for` (a warm-up's full plan; `plan` itself by default)."""

    def __init__(
        self,
        program: DenoisingProgram,
        plan: SamplingPlan,
        context: np.ndarray,
        negative_context: np.ndarray | None,
        compiled_for: SamplingPlan | None = None,
    ) -> None:
        self._program, self._plan, self._compiled_for = program, plan, compiled_for or plan
        self._context, self._negative_context = context, negative_context
        self._kept = KeptInputs()
        self._prepared: set[tuple[Any, ...]] = set()

    def prepare(self, latents: Any, conditioning: Conditioning = Conditioning()) -> None:
        program, plan = self._program, self._compiled_for
        shapes = (jnp.shape(latents), *(None if a is None else _shapes(a) for a in conditioning))
        if shapes in self._prepared:  # compiled already: not even traced again
            return
        inputs = self._inputs(latents, conditioning, abstract=True)
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
        self._prepared.add(shapes)

    def denoise(
        self, latents: Any, on_step: StepCallback | None = None, conditioning: Conditioning = Conditioning()
    ) -> Denoised:
        program, plan = self._program, self._plan
        with program.run():
            inputs = self._inputs(latents, conditioning)
            state = program.initial_state(plan, latents)
            controls = CacheControls.of(plan.cache)
            cache = program.initial_cache(controls, state.sample, inputs)
            if program.options.scan_diffusion_loop:
                state, report = self._scanned(state, cache, inputs)
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

    def _inputs(self, latents: Any, conditioning: Conditioning, *, abstract: bool = False) -> StepInputs:
        return self._program.inputs(jnp.shape(latents), self._context, self._negative_context, conditioning,
                                    abstract=abstract, kept=self._kept)  # fmt: skip

    def _scanned(self, state: SolverState, cache: CacheState, inputs: StepInputs) -> tuple[SolverState, StepReport]:
        """The plan as one compiled scan, or one per expert's run of steps where the experts move
        on and off the device between them; the cache state carries across."""
        program, steps, reports = self._program, PlanArrays.of(self._plan), []
        for expert, segment in program.loop_segments(self._plan):
            state, cache, report = program.loop(program.loop_params(expert), state, steps.segment(segment), inputs, cache)
            reports.append(report)
        return state, jax.tree.map(lambda *parts: jnp.concatenate(parts), *reports)


def _shapes(inputs: Any) -> tuple[Any, ...]:
    """A conditioning input's shapes, hashable: an array's, or those of a tree of them (the
    extensions' inputs, whose keys differ between segments: S2V's first clip has no motion latents)."""
    return (jax.tree.structure(inputs), tuple(jnp.shape(leaf) for leaf in jax.tree.leaves(inputs)))
