"""One denoising step, shared by the Python loop and the scan loop: the transformer pass
(conditional and unconditional rows in one batch), classifier-free guidance, the solver update.

Everything fixed for a generation (text K/V or embeddings, image conditioning, RoPE tables)
arrives as one `StepInputs` pytree, built once before the loop; the per-step values (solver
row, timestep, guidance scale) and the expert's weights are arguments. So one executable
serves every step, expert, prompt, seed and guidance value.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from flax import nnx

from wanjax.adapters.jax.transformer.blocks import CrossAttentionKV
from wanjax.adapters.jax.transformer.model import WanTransformer
from wanjax.adapters.jax.transformer.rope import RopeTables
from wanjax.domain.conditioning import Conditioning
from wanjax.domain.scheduling import SolverState, StepCoefficients, solver_step

TextInput = CrossAttentionKV | jax.Array
"""An expert's text input: its cross-attention K/V cache ([layers, copies * B, L, N, H] ...), or the
text embeddings [copies * B, L, text_dim] from which every step recomputes them (conditional rows first)."""


class StepInputs(NamedTuple):
    """What every step of one generation reads and the plan does not change (a pytree).

    text: one `TextInput` per expert (the embeddings are the same array for all experts).
    conditioning: extra_channels [B, F', H', W', Cx] and first_frame [B, 1, H', W', C] as
      given; image_context stacked for the guidance copies [copies * B, M, image_dim], or None
      when the cache already holds its K/V.
    rope: RoPE tables [S, H/2] of this latent shape.
    """

    text: tuple[TextInput, ...]
    conditioning: Conditioning
    rope: RopeTables


def text_batch(text: TextInput) -> int:
    """copies * B: the batch the transformer runs on."""
    return text.text_k.shape[1] if isinstance(text, CrossAttentionKV) else text.shape[0]


def guided_step(
    graphdef: nnx.GraphDef,
    params: nnx.State,
    state: SolverState,
    row: StepCoefficients,
    timestep: jax.Array,
    guidance_scale: jax.Array,
    text: TextInput,
    conditioning: Conditioning,
    rope: RopeTables,
) -> SolverState:
    """One step from state.sample [B, F', H', W', C]; the solver runs in the state's dtype (scheduler_dtype)."""
    model = nnx.merge(graphdef, params)
    x = state.sample
    copies = text_batch(text) // x.shape[0]
    x_in = with_first_frame(x, conditioning.first_frame).astype(model.dtype)
    if conditioning.extra_channels is not None:
        x_in = jnp.concatenate([x_in, conditioning.extra_channels.astype(model.dtype)], axis=-1)
    x_in = jnp.concatenate([x_in] * copies)  # [copies * B, F', H', W', C_in]
    t = _timesteps(model, x, timestep, conditioning, copies)
    if isinstance(text, CrossAttentionKV):
        velocity = model(x_in, t, cache=text, rope=rope)
    else:
        image_context = conditioning.image_context
        image_context = None if image_context is None else image_context.astype(model.dtype)
        velocity = model(x_in, t, text.astype(model.dtype), image_context=image_context, rope=rope)
    if copies == 2:  # velocity [2B, ...] fp32, conditional rows first
        conditional, unconditional = jnp.split(velocity, 2)
        velocity = unconditional + guidance_scale * (conditional - unconditional)
    return solver_step(state, velocity.astype(x.dtype), row.astype(x.dtype))


def with_first_frame(latents: jax.Array, first_frame: jax.Array | None) -> jax.Array:
    """Latent frame 0 replaced by the given image's latents (TI2V), else the latents as they are."""
    return latents if first_frame is None else latents.at[:, :1].set(first_frame.astype(latents.dtype))


def _timesteps(model: WanTransformer, x: jax.Array, timestep: jax.Array, c: Conditioning, copies: int) -> jax.Array:
    """[B * copies], or per token [B * copies, S] with the given first frame's tokens at 0 (TI2V)."""
    batch = x.shape[0] * copies
    if c.first_frame is None:
        return jnp.full((batch,), timestep, dtype=jnp.float32)
    frames, height, width = model.token_grid(x.shape)
    per_frame = jnp.full((frames,), timestep, dtype=jnp.float32).at[0].set(0.0)
    return jnp.broadcast_to(jnp.repeat(per_frame, height * width), (batch, frames * height * width))
