"""One denoising step, shared by the Python loop and the scan loop: the transformer pass
(conditional and unconditional rows in one batch), classifier-free guidance, the solver update,
and whatever the cache plan skips.

A step reads one `Step` (a pytree): its expert's weights, the per-step values (solver row,
timestep, guidance scale, the cache plan's flags) and its expert's share of what is fixed for a
generation (`StepInputs`: text K/V or embeddings, image conditioning, RoPE tables, built once
before the loop). What is fixed when it compiles (the graph, whether block weights stream from
host memory) is a `StepModel`. So one executable serves every step, expert, prompt, seed,
guidance value and cache schedule.

Cache policies (docs/caching.md, "Device semantics") skip work with `lax.cond`, so a skipped
transformer pass or block stack is not executed: MagCache and TeaCache skip the blocks and add
their cached residual (patch embedding, time embedding and head still run); the CFG cache runs
the conditional rows only; SenCache reuses the last guided prediction. The state they need is
carried in a `CacheState` whose structure follows the features the plan uses (none: nothing).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import attrs
import jax
import jax.numpy as jnp
from flax import nnx

from wanjax.adapters.jax.caching.rules import (
    estimate_unconditional,
    residual_norms,
    sencache_decision,
    teacache_decision,
)
from wanjax.adapters.jax.caching.state import (
    CacheControls,
    CacheShapes,
    CacheState,
    GuidanceCache,
    ResidualCache,
    SenCacheState,
    StepReport,
    initial_cache_state,
)
from wanjax.adapters.jax.transformer.animate.branch import AnimateInputs
from wanjax.adapters.jax.transformer.blocks import CrossAttentionKV
from wanjax.adapters.jax.transformer.model import TimeEmbedding, WanTransformer
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


class StepValues(NamedTuple):
    """One step's plan values ([] each, the row's window [K]); stacked [S] for the scan."""

    row: StepCoefficients
    timestep: jax.Array  # float32: t_i in 0..1000
    guidance_scale: jax.Array  # float32
    expert: jax.Array  # int32: which expert's weights `params` are


class Step(NamedTuple):
    """Everything one step reads besides the state it carries (a pytree, the step's one argument
    beside the solver and cache states): its expert's weights, the plan's values for it, the
    cache plan's controls, and that expert's share of the generation's `StepInputs`. A new
    per-step input is a field here, read where it is used."""

    params: nnx.State
    values: StepValues
    controls: CacheControls
    text: TextInput
    conditioning: Conditioning
    rope: RopeTables

    @classmethod
    def of(
        cls, params: nnx.State, values: StepValues, controls: CacheControls, inputs: StepInputs, expert: int
    ) -> Step:
        """Expert `expert`'s step: its `params` and its share of the generation's `inputs`."""
        return cls(params, values, controls, inputs.text[expert], inputs.conditioning, inputs.rope)


@attrs.frozen
class StepModel:
    """The static half of a step, fixed when it compiles: the experts' shared graph and whether
    their blocks' weights live in host memory and are streamed in, block by block, as the blocks
    run (`offload=layers`; adapters/jax/transformer/offload.py)."""

    graphdef: nnx.GraphDef
    stream_blocks: bool = False

    def merged(self, params: nnx.State) -> WanTransformer:
        """The model in the current trace: nnx's transforms (the layer scan) refuse Variables made
        in an outer one (a lax.cond branch, a lax.switch branch, the loop's scan)."""
        return nnx.merge(self.graphdef, jax.tree.map(lambda a: a, params))


def denoise_step(
    model: StepModel, step: Step, state: SolverState, cache: CacheState
) -> tuple[SolverState, CacheState, StepReport]:
    """One step from state.sample [B, F', H', W', C] under this step's cache controls (one
    step's values); the solver runs in the state's dtype (scheduler_dtype). With `NO_CACHE`
    and an empty `cache` this is the plain step: nothing carried, nothing reported."""
    x = state.sample
    if cache.sen is None:
        velocity, cache, report = _guided_velocity(model, step, x, cache)
    else:
        velocity, cache, report = _with_sencache(model, step, x, cache)
    return solver_step(state, velocity.astype(x.dtype), step.values.row.astype(x.dtype)), cache, report


def initial_cache(
    model: WanTransformer, controls: CacheControls, sample: jax.ShapeDtypeStruct, inputs: StepInputs
) -> CacheState:
    """The cache state both loops start from for a sample [B, F', H', W', C] (its dtype the
    scheduler's): sized by the features `controls` use, empty for a dense plan."""
    tokens = math.prod(model.token_grid((*sample.shape[:-1], model.spec.in_channels)))
    shapes = CacheShapes(
        latents=tuple(sample.shape),
        copies=text_batch(inputs.text[0]) // sample.shape[0],
        tokens=tokens,
        time_tokens=1 if inputs.conditioning.first_frame is None else tokens,
        width=model.spec.inner_dim,
        activation_dtype=model.dtype,
        scheduler_dtype=sample.dtype,
    )
    return initial_cache_state(controls, shapes)


def _with_sencache(
    model: StepModel, step: Step, x: jax.Array, cache: CacheState
) -> tuple[jax.Array, CacheState, StepReport]:
    """SenCache around the guided prediction: the last one reused (no transformer at all)
    while the drift since it was computed stays under the threshold."""
    sen, values, controls = cache.sen, step.values, step.controls
    may_reuse = ~controls.steps.force_compute & (sen.expert == values.expert)
    reuse, after_reuse = sencache_decision(sen, controls.rule, x, values.timestep, may_reuse)

    def reused(step: Step, cache: CacheState) -> tuple[jax.Array, CacheState]:
        return sen.velocity, cache._replace(sen=after_reuse)

    def computed(step: Step, cache: CacheState) -> tuple[jax.Array, CacheState]:
        velocity, cache, _ = _guided_velocity(model, step, x, cache)
        velocity = velocity.astype(sen.velocity.dtype)
        zero = jnp.float32(0.0)
        reference = SenCacheState(velocity, x, values.timestep / 1000.0, zero, zero, jnp.int32(0), values.expert)
        return velocity, cache._replace(sen=reference)

    velocity, cache = jax.lax.cond(reuse, reused, computed, step, cache)
    return velocity, cache, StepReport(transformer=~reuse)


def _guided_velocity(
    model: StepModel, step: Step, x: jax.Array, cache: CacheState
) -> tuple[jax.Array, CacheState, StepReport]:
    """The guided velocity [B, F', H', W', C] float32 at x; with the CFG cache, on its steps,
    from the conditional rows alone."""
    values, conditioning = step.values, step.conditioning
    transformer = model.merged(step.params)
    copies = text_batch(step.text) // x.shape[0]
    x_in = with_first_frame(x, conditioning.first_frame).astype(transformer.dtype)
    if conditioning.extra_channels is not None:
        x_in = jnp.concatenate([x_in, conditioning.extra_channels.astype(transformer.dtype)], axis=-1)
    t = _timesteps(transformer, x, values.timestep, conditioning, copies)  # [copies * B] or [copies * B, S]
    if cache.guidance is None:
        velocity, cache, report = _transformer_pass(model, step, cache, x_in, t)
        if copies == 2:  # conditional rows first
            velocity = _guidance(*jnp.split(velocity, 2), values.guidance_scale)
        return velocity, cache, report

    def both_passes(step: Step, cache: CacheState) -> tuple[jax.Array, jax.Array, CacheState]:
        velocity, cache, _ = _transformer_pass(model, step, cache, x_in, t)
        conditional, unconditional = jnp.split(velocity, 2)
        difference = GuidanceCache(unconditional - conditional, values.expert)  # [B, F', H', W', C] float32
        return conditional, unconditional, cache._replace(guidance=difference)

    def conditional_pass(step: Step, cache: CacheState) -> tuple[jax.Array, jax.Array, CacheState]:
        rows = x.shape[0]
        conditional, cache, _ = _transformer_pass(model, _conditional_rows(step, rows), cache, x_in, t[:rows])
        weights = step.controls.steps.cfg_weights
        return conditional, estimate_unconditional(conditional, cache.guidance.difference, weights), cache

    cond_only = step.controls.steps.cond_only & (cache.guidance.expert == values.expert)
    conditional, unconditional, cache = jax.lax.cond(cond_only, conditional_pass, both_passes, step, cache)
    return _guidance(conditional, unconditional, values.guidance_scale), cache, StepReport(unconditional=~cond_only)


def _conditional_rows(step: Step, rows: int) -> Step:
    """The step on the first `rows` (conditional) rows of its text and image inputs alone."""
    text = step.text
    text = jax.tree.map(lambda a: a[:, :rows], text) if isinstance(text, CrossAttentionKV) else text[:rows]
    image = step.conditioning.image_context
    conditioning = step.conditioning._replace(image_context=None if image is None else image[:rows])
    return step._replace(text=text, conditioning=conditioning)


def _transformer_pass(
    model: StepModel, step: Step, cache: CacheState, x_in: jax.Array, t: jax.Array
) -> tuple[jax.Array, CacheState, StepReport]:
    """The transformer on x_in [B, F', H', W', C_in] repeated for the rows of the step's text
    (conditional first) at timesteps `t` -> velocity [rows, F', H', W', C_out] float32. With a
    residual cache, its blocks are skipped (their cached residual added) on the steps the plan
    or TeaCache reuse. A VACE model's control latents [B, ...] are repeated as x_in is."""
    transformer, controls = model.merged(step.params), step.controls
    copies = text_batch(step.text) // x_in.shape[0]
    grid = transformer.token_grid(x_in.shape)
    x_rows = jnp.concatenate([x_in] * copies)
    tokens, time = transformer.embed(x_rows, t)  # [rows, S, D]
    control = step.conditioning.control
    scale = step.conditioning.control_scale
    vace = None if control is None else (jnp.concatenate([control] * copies), scale, x_rows.shape)
    animate = _animate_inputs(transformer, step.conditioning, x_rows.shape, copies)
    if animate is not None:
        tokens = tokens + animate.pose
    face = None if animate is None else animate.face
    if not controls.tracks_residual:
        out = _blocks(model, step, tokens, time.temb6, vace, face)
        norms = residual_norms(out - tokens, copies) if controls.calibrate else None
        return transformer.head(out, time, grid), cache, StepReport(residual_norms=norms)

    reuse, cache = _reuses_residual(cache, controls, time, step.values.expert)
    residual = cache.residual.residual

    def reused(step: Step, tokens: jax.Array, temb6: jax.Array) -> tuple[jax.Array, jax.Array]:
        return tokens + residual, residual

    def computed(step: Step, tokens: jax.Array, temb6: jax.Array) -> tuple[jax.Array, jax.Array]:
        out = _blocks(model, step, tokens, temb6, vace, face)
        return out, out - tokens

    out, residual = jax.lax.cond(reuse, reused, computed, step, tokens, time.temb6)
    cache = cache._replace(residual=ResidualCache(residual, step.values.expert))
    return transformer.head(out, time, grid), cache, StepReport(blocks=~reuse)


def _reuses_residual(
    cache: CacheState, controls: CacheControls, time: TimeEmbedding, expert: jax.Array
) -> tuple[jax.Array, CacheState]:
    """Whether the blocks are skipped: as the plan says (MagCache), or by TeaCache's measure;
    never with a residual another expert (or no step yet) computed."""
    same_expert = cache.residual.expert == expert
    if cache.tea is None:
        return controls.steps.reuse_residual & same_expert, cache
    rule = controls.rule
    measured = (time.temb6 if rule.input_is_modulation else time.temb).astype(jnp.float32)
    may_reuse = ~controls.steps.force_compute & same_expert
    reuse, tea = teacache_decision(cache.tea, rule, measured, may_reuse)
    return reuse, cache._replace(tea=tea)


def _animate_inputs(
    transformer: WanTransformer, c: Conditioning, shape: tuple[int, ...], copies: int
) -> AnimateInputs | None:
    """An Animate model's pose and face tokens for the rows of latents of `shape` (conditional
    rows first; the others see a blank face, all -1, as diffusers' unconditional pass); None
    for the other models."""
    if c.pose is None:
        return None
    blank = -jnp.ones_like(c.face)
    faces = jnp.concatenate([c.face] + [blank] * (copies - 1)).astype(transformer.dtype)
    pose = jnp.concatenate([c.pose] * copies).astype(transformer.dtype)
    return transformer.animate_inputs(pose, faces, shape)


def _blocks(
    model: StepModel,
    step: Step,
    tokens: jax.Array,
    temb6: jax.Array,
    vace: tuple[jax.Array, jax.Array | None, tuple[int, ...]] | None,
    face: jax.Array | None = None,
) -> jax.Array:
    """tokens [rows, S, D] through every block (a VACE model's VACE blocks first, reading its
    control latents [rows, ...] and scale, for latents of the given shape; an Animate model's
    face adapters reading its face tokens [rows, F', N + 1, D]); the cross-attention K/V from
    the cache, or computed here from the text embeddings (and image tokens)."""
    transformer = model.merged(step.params)
    control = None if vace is None else transformer.vace_control(*vace)
    kv = step.text
    if not isinstance(kv, CrossAttentionKV):
        image = step.conditioning.image_context
        image = None if image is None else image.astype(transformer.dtype)
        kv = transformer.cross_attention_kv(kv.astype(transformer.dtype), image, stream=model.stream_blocks)
    return transformer.run_blocks(tokens, kv, temb6, step.rope, control, face, stream=model.stream_blocks)


def _guidance(conditional: jax.Array, unconditional: jax.Array, scale: jax.Array) -> jax.Array:
    """Classifier-free guidance of the two predictions [B, ...] float32."""
    return unconditional + scale * (conditional - unconditional)


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
