"""One denoising step, shared by the Python loop and the scan loop: the transformer pass on the
guidance rows (conditional and unconditional in one batch, laid out by the `Guider` from each
input's declared split), their guided combination, the solver update, and whatever the cache
plan skips.

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
from wanjax.adapters.jax.denoising.guider import Guider, TextInput
from wanjax.adapters.jax.transformer.blocks import CrossAttentionKV
from wanjax.adapters.jax.transformer.model import TimeEmbedding, WanTransformer
from wanjax.adapters.jax.transformer.rope import RopeTables
from wanjax.domain.conditioning import Conditioning
from wanjax.domain.scheduling import SolverState, StepCoefficients, solver_step

class StepInputs(NamedTuple):
    """What every step of one generation reads and the plan does not change (a pytree).

    text: one `TextInput` per expert, its rows the guider's (the embeddings are the same array
      for all experts).
    conditioning: as the mode gave it, one row per sample (the step lays out the guidance rows);
      image_context None when the text's K/V cache already holds its K/V.
    rope: RoPE tables [S, H/2] of this latent shape.
    """

    text: tuple[TextInput, ...]
    conditioning: Conditioning
    rope: RopeTables


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
        copies=Guider.of_text(inputs.text[0], sample.shape[0]).copies,
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
    values, batch = step.values, x.shape[0]
    guider = Guider.of_text(step.text, batch)
    if cache.guidance is None:
        velocity, cache, report = _transformer_pass(model, step, guider, cache, x)
        return guider.combine(velocity, values.guidance_scale), cache, report

    def both_passes(step: Step, cache: CacheState) -> tuple[jax.Array, jax.Array, CacheState]:
        velocity, cache, _ = _transformer_pass(model, step, guider, cache, x)
        conditional, unconditional = guider.split(velocity)
        difference = GuidanceCache(unconditional - conditional, values.expert)  # [B, F', H', W', C] float32
        return conditional, unconditional, cache._replace(guidance=difference)

    def conditional_pass(step: Step, cache: CacheState) -> tuple[jax.Array, jax.Array, CacheState]:
        step = step._replace(text=guider.conditional_text(step.text, batch))
        conditional, cache, _ = _transformer_pass(model, step, guider.conditional, cache, x)
        weights = step.controls.steps.cfg_weights
        return conditional, estimate_unconditional(conditional, cache.guidance.difference, weights), cache

    cond_only = step.controls.steps.cond_only & (cache.guidance.expert == values.expert)
    conditional, unconditional, cache = jax.lax.cond(cond_only, conditional_pass, both_passes, step, cache)
    return guider.guided(conditional, unconditional, values.guidance_scale), cache, StepReport(unconditional=~cond_only)


def _transformer_pass(
    model: StepModel, step: Step, guider: Guider, cache: CacheState, x: jax.Array
) -> tuple[jax.Array, CacheState, StepReport]:
    """The transformer on the guider's rows of x [B, F', H', W', C] and of the step's
    conditioning (as each input declares) -> velocity [rows, F', H', W', C_out] float32. With a
    residual cache, its blocks are skipped (their cached residual added) on the steps the plan
    or TeaCache reuse."""
    transformer, controls = model.merged(step.params), step.controls
    rows = guider.rows(step.conditioning)
    x_rows = _model_input(transformer, guider.latent_rows(x), rows)
    grid = transformer.token_grid(x_rows.shape)
    t = _timesteps(transformer, x_rows, step.values.timestep, rows.first_frame)  # [rows] or [rows, S]
    animate = None
    if rows.pose is not None:
        pose, face = rows.pose.astype(transformer.dtype), rows.face.astype(transformer.dtype)
        animate = transformer.animate_inputs(pose, face, x_rows.shape)
    tokens, time = transformer.embed(x_rows, t, None if animate is None else animate.pose)  # [rows, S, D]
    inputs = _BlockInputs(
        image=rows.image_context,
        vace=None if rows.control is None else (rows.control, rows.control_scale, x_rows.shape),
        face=None if animate is None else animate.face,
    )
    if not controls.tracks_residual:
        out = _blocks(model, step, tokens, time.temb6, inputs)
        norms = residual_norms(out - tokens, guider.copies) if controls.calibrate else None
        return transformer.head(out, time, grid), cache, StepReport(residual_norms=norms)

    reuse, cache = _reuses_residual(cache, controls, time, step.values.expert)
    residual = cache.residual.residual

    def reused(step: Step, tokens: jax.Array, temb6: jax.Array) -> tuple[jax.Array, jax.Array]:
        return tokens + residual, residual

    def computed(step: Step, tokens: jax.Array, temb6: jax.Array) -> tuple[jax.Array, jax.Array]:
        out = _blocks(model, step, tokens, temb6, inputs)
        return out, out - tokens

    out, residual = jax.lax.cond(reuse, reused, computed, step, tokens, time.temb6)
    cache = cache._replace(residual=ResidualCache(residual, step.values.expert))
    return transformer.head(out, time, grid), cache, StepReport(blocks=~reuse)


def _model_input(transformer: WanTransformer, latent_rows: jax.Array, rows: Conditioning) -> jax.Array:
    """The rows' latents [rows, F', H', W', C] as the transformer takes them: the given first
    frame's latents in frame 0 (TI2V), the extra channels appended (I2V)."""
    x = with_first_frame(latent_rows, rows.first_frame).astype(transformer.dtype)
    if rows.extra_channels is None:
        return x
    return jnp.concatenate([x, rows.extra_channels.astype(transformer.dtype)], axis=-1)


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


class _BlockInputs(NamedTuple):
    """What the blocks read of the conditioning rows besides the text: the image tokens
    [rows, M, image_dim] (when no K/V cache holds theirs), a VACE model's control latents
    [rows, ...], their scale and the latents' shape, an Animate model's face tokens
    [rows, F', N + 1, D]; None where the model has none."""

    image: jax.Array | None
    vace: tuple[jax.Array, jax.Array | None, tuple[int, ...]] | None
    face: jax.Array | None


def _blocks(model: StepModel, step: Step, tokens: jax.Array, temb6: jax.Array, inputs: _BlockInputs) -> jax.Array:
    """tokens [rows, S, D] through every block (a VACE model's VACE blocks first, an Animate
    model's face adapters after theirs); the cross-attention K/V from the cache, or computed
    here from the text embeddings (and image tokens)."""
    transformer = model.merged(step.params)
    control = None if inputs.vace is None else transformer.vace_control(*inputs.vace)
    kv = step.text
    if not isinstance(kv, CrossAttentionKV):
        image = None if inputs.image is None else inputs.image.astype(transformer.dtype)
        kv = transformer.cross_attention_kv(kv.astype(transformer.dtype), image, stream=model.stream_blocks)
    return transformer.run_blocks(tokens, kv, temb6, step.rope, control, inputs.face, stream=model.stream_blocks)


def with_first_frame(latents: jax.Array, first_frame: jax.Array | None) -> jax.Array:
    """Latent frame 0 replaced by the given image's latents (TI2V), else the latents as they are."""
    return latents if first_frame is None else latents.at[:, :1].set(first_frame.astype(latents.dtype))


def _timesteps(
    model: WanTransformer, x_rows: jax.Array, timestep: jax.Array, first_frame: jax.Array | None
) -> jax.Array:
    """[rows], or per token [rows, S] with the given first frame's tokens at 0 (TI2V)."""
    batch = x_rows.shape[0]
    if first_frame is None:
        return jnp.full((batch,), timestep, dtype=jnp.float32)
    frames, height, width = model.token_grid(x_rows.shape)
    per_frame = jnp.full((frames,), timestep, dtype=jnp.float32).at[0].set(0.0)
    return jnp.broadcast_to(jnp.repeat(per_frame, height * width), (batch, frames * height * width))
