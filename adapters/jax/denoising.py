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
from wanjax.domain.conditioning import Conditioning
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
        self,
        latents: Any,
        plan: SamplingPlan,
        context: np.ndarray,
        negative_context: np.ndarray | None,
        conditioning: Conditioning = Conditioning(),
    ) -> None:
        state = plan.solver.initial_state(jnp.asarray(latents, jnp.float32))
        contexts = _stack_context(context, negative_context)
        self._step.prepare(*self._step_args(state, plan, 0, contexts, _on_device(conditioning)))

    def denoise(
        self,
        latents: Any,
        plan: SamplingPlan,
        context: np.ndarray,
        negative_context: np.ndarray | None,
        on_step: StepCallback | None = None,
        conditioning: Conditioning = Conditioning(),
    ) -> jax.Array:
        contexts = jnp.asarray(_stack_context(context, negative_context))
        conditioning = _on_device(conditioning)
        state = plan.solver.initial_state(jnp.asarray(latents, jnp.float32))
        for i in range(plan.num_steps):
            state = self._step(*self._step_args(state, plan, i, contexts, conditioning))
            if on_step is not None:
                on_step(i + 1, plan.num_steps)
        return jax.block_until_ready(_with_first_frame(state.sample, conditioning.first_frame))

    def _step_args(
        self, state: SolverState, plan: SamplingPlan, i: int, contexts: Any, conditioning: Conditioning
    ) -> tuple[Any, ...]:
        params = self._params[plan.experts[i]]
        row = plan.solver.row(i)
        return (params, state, row, plan.timesteps[i], plan.guidance_scales[i], contexts, conditioning)

    def _guided_step(
        self,
        params: nnx.State,
        state: SolverState,
        row: StepCoefficients,
        timestep: jax.Array,
        guidance_scale: jax.Array,
        contexts: jax.Array,  # [B, L, D] or, with guidance, [2B, L, D] (conditional first)
        conditioning: Conditioning,
    ) -> SolverState:
        model = nnx.merge(self._graphdef, params)
        x = state.sample  # [B, F', H', W', C] float32
        copies = contexts.shape[0] // x.shape[0]
        x_in = _with_first_frame(x, conditioning.first_frame)
        if conditioning.extra_channels is not None:
            x_in = jnp.concatenate([x_in, conditioning.extra_channels], axis=-1)
        x_in = jnp.concatenate([x_in] * copies).astype(self._dtype)
        t = _timesteps(model, x, timestep, conditioning, copies)
        image_context = conditioning.image_context
        if image_context is not None:
            image_context = jnp.concatenate([image_context] * copies).astype(self._dtype)
        velocity = model(x_in, t, contexts.astype(self._dtype), image_context=image_context).astype(jnp.float32)
        if copies == 2:
            conditional, unconditional = jnp.split(velocity, 2)
            velocity = unconditional + guidance_scale * (conditional - unconditional)
        return solver_step(state, velocity, row)


def _on_device(conditioning: Conditioning) -> Conditioning:
    return Conditioning(*(None if a is None else jnp.asarray(a, jnp.float32) for a in conditioning))


def _with_first_frame(latents: jax.Array, first_frame: jax.Array | None) -> jax.Array:
    """Latent frame 0 replaced by the given image's latents (TI2V), else the latents as they are."""
    return latents if first_frame is None else latents.at[:, :1].set(first_frame)


def _timesteps(model: WanTransformer, x: jax.Array, timestep: jax.Array, c: Conditioning, copies: int) -> jax.Array:
    """[B * copies], or per token [B * copies, S] with the given first frame's tokens at 0 (TI2V)."""
    batch = x.shape[0] * copies
    if c.first_frame is None:
        return jnp.full((batch,), timestep, dtype=jnp.float32)
    frames, height, width = model.token_grid(x.shape)
    per_frame = jnp.full((frames,), timestep, dtype=jnp.float32).at[0].set(0.0)
    return jnp.broadcast_to(jnp.repeat(per_frame, height * width), (batch, frames * height * width))


def _stack_context(context: np.ndarray, negative_context: np.ndarray | None) -> np.ndarray:
    """Conditional and unconditional embeddings stacked on the batch axis: one pass does both."""
    if negative_context is None:
        return context
    return np.concatenate([context, negative_context], axis=0)
