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

A step cache (docs/caching.md, "Device semantics") is the plan's device feature
(adapters/jax/denoising/caching/feature.py), called at three places: around the guided prediction (SenCache
reuses the last one), around the guidance rows' passes (the CFG cache runs the conditional rows
only) and around the transformer blocks (MagCache and TeaCache add a cached residual; patch
embedding, time embedding and head still run). Features skip work with `lax.cond`, so a skipped
pass or block stack is not executed; their state is carried in a `CacheState` keyed by feature
(a dense plan: nothing).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from typing import Any, NamedTuple

import attrs
import jax
import jax.numpy as jnp
from flax import nnx

from wanjax.adapters.jax.denoising.caching.feature import CacheShapes, CacheState, Result, StepReport
from wanjax.adapters.jax.denoising.caching.state import CacheControls, initial_cache_state
from wanjax.adapters.jax.denoising.guider import Guider, TextInput
from wanjax.adapters.jax.transformer.blocks import CrossAttentionKV
from wanjax.adapters.jax.transformer.model import ALL_LAYERS, WanTransformer
from wanjax.adapters.jax.transformer.rope import RopeTables
from wanjax.domain.attention_call import SELF, AttentionCall, FrameBlockCausal
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


class FrameValues(NamedTuple):
    """One Diffusion Forcing iteration's values per latent frame (domain/frame_schedule.py): the
    timestep the model sees each frame at, the solver row each takes, which frames it moves, and
    the noise mixed into the given frames before the model sees them (none at level 0)."""

    timesteps: jax.Array  # [F] float32
    rows: StepCoefficients  # [F] each, the window [F, K]
    updated: jax.Array  # [F] bool
    first: jax.Array  # [F] bool: the frames taking their first step
    noised: jax.Array  # [F] bool: the given frames seen noisier
    noise_level: jax.Array  # [] float32: addnoise_condition / 1000
    noise_key: jax.Array  # [2] uint32: this iteration's draw

    def model_input(self, x: jax.Array) -> jax.Array:
        """x [B, F, H, W, C] as the model sees it: the given frames mixed with fresh noise."""
        noise = jax.random.normal(jax.random.wrap_key_data(self.noise_key), x.shape, x.dtype)
        mixed = x * (1.0 - self.noise_level) + noise * self.noise_level
        return jnp.where(self.noised[None, :, None, None, None], mixed, x)

    def solver_step(self, state: SolverState, velocity: jax.Array) -> SolverState:
        """Each moved frame one step of its own solver row; the others' state as it was."""
        dtype = state.sample.dtype
        per_frame = lambda a: a.astype(dtype).reshape(1, -1, 1, 1, 1)  # noqa: E731  [1, F, 1, 1, 1]
        window = lambda a: jnp.moveaxis(a.astype(dtype), -1, 0).reshape(a.shape[-1], 1, -1, 1, 1, 1)  # noqa: E731
        row = StepCoefficients(
            per_frame(self.rows.sigma), per_frame(self.rows.sample_coef), per_frame(self.rows.last_coef),
            window(self.rows.corrector_coefs), per_frame(self.rows.corrected_coef), window(self.rows.predictor_coefs),
        )  # fmt: skip
        moved = solver_step(state, velocity.astype(dtype), row)
        # diffusers' and SkyReels-V2's pipelines step each frame's scheduler on a view of the latents
        # and write its result back into them: after a frame's first step (which has no corrector),
        # the scheduler's last sample, that view, holds the new sample. The next step corrects from it.
        first = self.first[None, :, None, None, None]
        moved = moved._replace(last_sample=jnp.where(first, moved.sample, moved.last_sample))
        keep = self.updated[None, :, None, None, None]
        return jax.tree.map(lambda new, old: jnp.where(keep, new, old), moved, state)


class StepValues(NamedTuple):
    """One step's plan values ([] each, the row's window [K]); stacked [S] for the scan. `frames`:
    a Diffusion Forcing iteration's per-frame values, which replace the row and timestep."""

    row: StepCoefficients
    timestep: jax.Array  # float32: t_i in 0..1000
    guidance_scale: jax.Array  # float32
    expert: jax.Array  # int32: which expert's weights `params` are
    frames: FrameValues | None = None


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
    """The static half of a step, fixed when it compiles: the experts' shared graph, whether
    their blocks' weights live in host memory and are streamed in, block by block, as the blocks
    run (`offload=layers`; adapters/jax/transformer/offload.py), and the structure of the blocks'
    self-attention (SkyReels-V2's frame-block-causal, or none)."""

    graphdef: nnx.GraphDef
    stream_blocks: bool = False
    structure: FrameBlockCausal | None = None

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
    x, frames = state.sample, step.values.frames
    seen = x if frames is None else frames.model_input(x)
    feature = step.controls.device_feature

    def predict(step: Step, cache: CacheState) -> Result:
        return feature.around_guidance(step, x, Guider.of_text(step.text, x.shape[0]), cache, passes)

    def passes(step: Step, guider: Guider, cache: CacheState) -> Result:
        return _transformer_pass(model, step, guider, cache, seen)

    velocity, cache, report = feature.around_prediction(step, x, cache, predict)
    if frames is not None:
        return frames.solver_step(state, velocity), cache, report
    return solver_step(state, velocity.astype(x.dtype), step.values.row.astype(x.dtype)), cache, report


def initial_cache(
    model: WanTransformer, controls: CacheControls, sample: jax.ShapeDtypeStruct, inputs: StepInputs
) -> CacheState:
    """The cache state both loops start from for a sample [B, F', H', W', C] (its dtype the
    scheduler's): the state of the feature `controls` runs, under its name; empty for a dense plan."""
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


def _transformer_pass(
    model: StepModel, step: Step, guider: Guider, cache: CacheState, x: jax.Array
) -> tuple[jax.Array, CacheState, StepReport]:
    """The transformer on the guider's rows of x [B, F', H', W', C] and of the step's
    conditioning (as each input declares) -> velocity [rows, F', H', W', C_out] float32; the
    plan's feature acts around its blocks."""
    transformer, controls = model.merged(step.params), step.controls
    rows = guider.rows(step.conditioning)
    x_rows = _model_input(transformer, guider.latent_rows(x), rows)
    grid = transformer.token_grid(x_rows.shape)
    t = _timesteps(transformer, x_rows, step.values, rows.first_frame)  # [rows] or [rows, S]
    prepared = transformer.prepare_extensions(rows.extensions, x_rows.shape)  # each extension's inputs
    tokens, time = transformer.embed(x_rows, t, prepared)  # [rows, S, D]
    blocks = functools.partial(_blocks, model, image=rows.image_context, prepared=prepared,
                               attention=AttentionCall(kind=SELF, grid=grid, structure=model.structure))
    out, cache, report = controls.device_feature.around_blocks(step, tokens, time, cache, blocks, guider.copies)
    return transformer.head(out, time, grid), cache, report


def _model_input(transformer: WanTransformer, latent_rows: jax.Array, rows: Conditioning) -> jax.Array:
    """The rows' latents [rows, F', H', W', C] as the transformer takes them: the given first
    frame's latents in frame 0 (TI2V), the extra channels appended (I2V)."""
    x = with_first_frame(latent_rows, rows.first_frame).astype(transformer.dtype)
    if rows.extra_channels is None:
        return x
    return jnp.concatenate([x, rows.extra_channels.astype(transformer.dtype)], axis=-1)


def _blocks(
    model: StepModel,
    step: Step,
    tokens: jax.Array,
    temb6: jax.Array,
    layers: slice = ALL_LAYERS,
    *,
    image: jax.Array | None,
    prepared: Mapping[str, Any],
    attention: AttentionCall,
) -> jax.Array:
    """tokens [rows, S, D] through every block, or the range `layers`, with what each extension
    `prepared` of its rows of the conditioning, their self-attention as `attention` describes it;
    the cross-attention K/V from the cache, or computed here from the text embeddings (and the
    image tokens [rows, M, image_dim], when no K/V cache holds theirs)."""
    transformer = model.merged(step.params)
    kv = step.text
    if not isinstance(kv, CrossAttentionKV):
        image = None if image is None else image.astype(transformer.dtype)
        kv = transformer.cross_attention_kv(kv.astype(transformer.dtype), image, stream=model.stream_blocks)
    return transformer.run_blocks(
        tokens, kv, temb6, step.rope, prepared, attention=attention, stream=model.stream_blocks, layers=layers
    )


def with_first_frame(latents: jax.Array, first_frame: jax.Array | None) -> jax.Array:
    """Latent frame 0 replaced by the given image's latents (TI2V), else the latents as they are."""
    return latents if first_frame is None else latents.at[:, :1].set(first_frame.astype(latents.dtype))


def _timesteps(
    model: WanTransformer, x_rows: jax.Array, values: StepValues, first_frame: jax.Array | None
) -> jax.Array:
    """[rows], or per token [rows, S]: each latent frame's own (Diffusion Forcing), or the given
    first frame's tokens at 0 (TI2V)."""
    batch = x_rows.shape[0]
    if first_frame is None and values.frames is None:
        return jnp.full((batch,), values.timestep, dtype=jnp.float32)
    frames, height, width = model.token_grid(x_rows.shape)
    if values.frames is not None:
        per_frame = values.frames.timesteps.astype(jnp.float32)[:: model.spec.patch_size[0]]
    else:
        per_frame = jnp.full((frames,), values.timestep, dtype=jnp.float32).at[0].set(0.0)
    return jnp.broadcast_to(jnp.repeat(per_frame, height * width), (batch, frames * height * width))
