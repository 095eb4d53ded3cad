"""The JAX denoiser: executes a SamplingPlan with the Wan transformer(s), one compiled step per call.

The step (transformer pass, classifier-free guidance, solver update) is one executable;
the plan's per-step values (solver row, timestep, guidance scale) and the expert's
weights are its arguments, so any step count, shift, guidance scale or expert switch
(Wan 2.2's experts share one architecture) runs without recompiling.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from wanjax.adapters.jax.compiled import CompiledFunction
from wanjax.adapters.jax.transformer.model import WanTransformer
from wanjax.domain.plan import SamplingPlan
from wanjax.domain.ports import StepCallback
from wanjax.domain.scheduling import SolverState, StepCoefficients, solver_step


class JaxDenoiser:
    """Implements the Denoiser port on Wan transformers: one, or Wan 2.2's two experts (high noise first)."""

    def __init__(self, experts: Sequence[WanTransformer]) -> None:
        self._graphdef = nnx.graphdef(experts[0])
        self._params = [nnx.split(expert)[1] for expert in experts]
        self._dtype = experts[0].dtype
        self._step = CompiledFunction(self._guided_step)

    @property
    def num_compiled(self) -> int:
        """Executables compiled so far (one per latent/context shape, whatever the expert)."""
        return self._step.num_compiled

    def noise(self, seed: int, shape: tuple[int, ...]) -> jax.Array:
        return jax.random.normal(jax.random.key(seed), shape, dtype=jnp.float32)

    def prepare(
        self, latents: Any, plan: SamplingPlan, context: np.ndarray, negative_context: np.ndarray | None
    ) -> None:
        state = plan.solver.initial_state(jnp.asarray(latents, jnp.float32))
        self._step.prepare(*self._step_args(state, plan, 0, _stack_context(context, negative_context)))

    def denoise(
        self,
        latents: Any,
        plan: SamplingPlan,
        context: np.ndarray,
        negative_context: np.ndarray | None,
        on_step: StepCallback | None = None,
    ) -> jax.Array:
        contexts = jnp.asarray(_stack_context(context, negative_context))
        state = plan.solver.initial_state(jnp.asarray(latents, jnp.float32))
        for i in range(plan.num_steps):
            state = self._step(*self._step_args(state, plan, i, contexts))
            if on_step is not None:
                on_step(i + 1, plan.num_steps)
        return jax.block_until_ready(state.sample)

    def _step_args(self, state: SolverState, plan: SamplingPlan, i: int, contexts: Any) -> tuple[Any, ...]:
        params = self._params[plan.experts[i]]
        return (params, state, plan.solver.row(i), plan.timesteps[i], plan.guidance_scales[i], contexts)

    def _guided_step(
        self,
        params: nnx.State,
        state: SolverState,
        row: StepCoefficients,
        timestep: jax.Array,
        guidance_scale: jax.Array,
        contexts: jax.Array,  # [B, L, D] or, with guidance, [2B, L, D] (conditional first)
    ) -> SolverState:
        model = nnx.merge(self._graphdef, params)
        x = state.sample  # [B, F', H', W', C] float32
        copies = contexts.shape[0] // x.shape[0]
        x_in = jnp.concatenate([x] * copies).astype(self._dtype)
        t = jnp.full((x_in.shape[0],), timestep, dtype=jnp.float32)
        velocity = model(x_in, t, contexts.astype(self._dtype)).astype(jnp.float32)
        if copies == 2:
            conditional, unconditional = jnp.split(velocity, 2)
            velocity = unconditional + guidance_scale * (conditional - unconditional)
        return solver_step(state, velocity, row)


def _stack_context(context: np.ndarray, negative_context: np.ndarray | None) -> np.ndarray:
    """Conditional and unconditional embeddings stacked on the batch axis: one pass does both."""
    if negative_context is None:
        return context
    return np.concatenate([context, negative_context], axis=0)
