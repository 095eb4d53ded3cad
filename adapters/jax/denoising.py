"""The JAX denoiser: executes a SamplingPlan with the Wan transformer(s).

Before the loop, once per generation: the text (and I2V image) cross-attention K/V of every
block for the conditional and unconditional prompts (`use_kv_cache`), and the RoPE tables
of the latent shape. Then either a Python loop over one compiled step (per-step progress;
any step count, shift, guidance scale or expert switch runs without recompiling: Wan 2.2's
experts share one architecture, so their weights are just arguments) or, with
`scan_diffusion_loop`, one compiled `lax.scan` over all steps (`scan_loop`). Both execute the
plan's `CachePlan` with the same step (`denoise_step`); each run returns its own report of what ran.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.typing import DTypeLike

from wanjax.adapters.jax.cache_report import run_report, stacked
from wanjax.adapters.jax.cache_state import CacheControls, CacheState, StepReport
from wanjax.adapters.jax.compiled import CompiledFunction
from wanjax.adapters.jax.denoise_step import (
    StepInputs,
    StepValues,
    denoise_step,
    initial_cache,
    with_first_frame,
)
from wanjax.adapters.jax.scan_loop import PlanArrays, scan_denoise
from wanjax.adapters.jax.transformer.blocks import CrossAttentionKV
from wanjax.adapters.jax.transformer.model import WanTransformer
from wanjax.adapters.jax.transformer.rope import RopeTables
from wanjax.domain.conditioning import Conditioning
from wanjax.domain.errors import NumericalError
from wanjax.domain.plan import SamplingPlan
from wanjax.domain.ports import Denoised, StepCallback
from wanjax.domain.scheduling import SolverState


@attrs.frozen(kw_only=True)
class DenoiserOptions:
    """How the loop runs; none of these changes which model runs (config keys of the same names).

    use_kv_cache: cross-attention K/V computed once per generation, not in every step.
    scan_diffusion_loop: all steps as one lax.scan (no per-step progress) instead of a Python loop.
    scheduler_dtype: the dtype of the solver state and its arithmetic (the latents between steps).
    """

    use_kv_cache: bool = True
    scan_diffusion_loop: bool = False
    scheduler_dtype: DTypeLike = jnp.float32


class JaxDenoiser:
    """Implements the Denoiser port on Wan transformers: one, or Wan 2.2's two experts (high noise first)."""

    def __init__(self, experts: Sequence[WanTransformer], options: DenoiserOptions = DenoiserOptions()) -> None:
        self._graphdef = nnx.graphdef(experts[0])
        self._architecture = experts[0]  # read for shapes and dtypes only
        self._params = tuple(nnx.split(expert)[1] for expert in experts)
        self._rope_tables = experts[0].rope_tables
        self._in_channels = experts[0].spec.in_channels
        self._dtype = experts[0].dtype
        self._options = options
        options = _compiler_options()
        self._cross_kv = CompiledFunction(self._cross_attention_kv, compiler_options=options)
        self._step = CompiledFunction(self._guided_step, compiler_options=options)
        self._loop = CompiledFunction(self._scan_loop, compiler_options=options)

    @property
    def num_compiled(self) -> int:
        """Denoising executables compiled so far: one per latent/context shape whatever the expert
        (and, with scan_diffusion_loop, per step count); the KV-cache builder is not counted."""
        return self._step.num_compiled + self._loop.num_compiled

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
        inputs = self._inputs(jnp.shape(latents), context, negative_context, conditioning, abstract=True)
        state = self._initial_state(plan, latents)
        if self._options.scan_diffusion_loop:
            self._loop.prepare(self._params, state, PlanArrays.of(plan), inputs)
        else:
            controls = CacheControls.of(plan.cache)
            cache = initial_cache(self._architecture, controls, state.sample, inputs)
            self._step.prepare(*self._step_args(state, plan, 0, inputs, cache, controls))

    def denoise(
        self,
        latents: Any,
        plan: SamplingPlan,
        context: np.ndarray,
        negative_context: np.ndarray | None,
        on_step: StepCallback | None = None,
        conditioning: Conditioning = Conditioning(),
    ) -> Denoised:
        inputs = self._inputs(jnp.shape(latents), context, negative_context, conditioning, abstract=False)
        state = self._initial_state(plan, latents)
        if self._options.scan_diffusion_loop:
            state, report = self._loop(self._params, state, PlanArrays.of(plan), inputs)
            if on_step is not None:
                on_step(plan.num_steps, plan.num_steps)
        else:
            controls, reports = CacheControls.of(plan.cache), []
            cache = initial_cache(self._architecture, controls, state.sample, inputs)
            for i in range(plan.num_steps):
                state, cache, step_report = self._step(*self._step_args(state, plan, i, inputs, cache, controls))
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

    def _initial_state(self, plan: SamplingPlan, latents: Any) -> SolverState:
        return plan.solver.initial_state(jnp.asarray(latents, self._options.scheduler_dtype))

    def _inputs(
        self,
        latent_shape: tuple[int, ...],
        context: np.ndarray,
        negative_context: np.ndarray | None,
        conditioning: Conditioning,
        *,
        abstract: bool,
    ) -> StepInputs:
        """The per-generation inputs. `abstract` (for compiling): the KV cache as shapes only, its
        builder compiled but not run."""
        contexts = jnp.asarray(_stack_context(context, negative_context))  # [copies * B, L, text_dim]
        copies = contexts.shape[0] // latent_shape[0]
        c = _on_device(conditioning)
        image_context = None if c.image_context is None else jnp.concatenate([c.image_context] * copies)
        model_input_shape = (*latent_shape[:-1], self._in_channels)  # the extra channels included
        rope = RopeTables(*(jnp.asarray(a) for a in self._rope_tables(model_input_shape)))
        if not self._options.use_kv_cache:
            text = (contexts,) * len(self._params)
            return StepInputs(text, c._replace(image_context=image_context), rope)
        if abstract:
            text = tuple(jax.eval_shape(self._cross_attention_kv, p, contexts, image_context) for p in self._params)
            self._cross_kv.prepare(self._params[0], contexts, image_context)
        else:
            text = tuple(self._cross_kv(p, contexts, image_context) for p in self._params)
        return StepInputs(text, c._replace(image_context=None), rope)

    def _step_args(
        self,
        state: SolverState,
        plan: SamplingPlan,
        i: int,
        inputs: StepInputs,
        cache: CacheState = CacheState(),
        controls: CacheControls | None = None,
    ) -> tuple[Any, ...]:
        """The Python loop's step i; `cache` as the previous step left it (empty for a dense plan),
        `controls` the plan's (`CacheControls.of(plan.cache)`, made once per run by the loop)."""
        expert = plan.experts[i]
        values = StepValues(plan.solver.row(i), plan.timesteps[i], plan.guidance_scales[i], np.int32(expert))
        controls = (CacheControls.of(plan.cache) if controls is None else controls).at(i)
        return (
            self._params[expert], state, cache, values, controls, inputs.text[expert], inputs.conditioning, inputs.rope,
        )  # fmt: skip

    def _cross_attention_kv(
        self, params: nnx.State, contexts: jax.Array, image_context: jax.Array | None
    ) -> CrossAttentionKV:
        model = nnx.merge(self._graphdef, params)
        image_context = None if image_context is None else image_context.astype(self._dtype)
        return model.cross_attention_kv(contexts.astype(self._dtype), image_context)

    def _guided_step(self, params: nnx.State, *args: Any) -> tuple[SolverState, CacheState, StepReport]:
        return denoise_step(self._graphdef, params, *args)

    def _scan_loop(
        self, params: tuple[nnx.State, ...], state: SolverState, steps: PlanArrays, inputs: StepInputs
    ) -> tuple[SolverState, StepReport]:
        return scan_denoise(self._graphdef, params, state, steps, inputs)


def _compiler_options() -> dict[str, str]:
    """XLA options for the denoising executables: on CPU, no YNNPACK fusions.

    This jaxlib hands CPU dots (with the softmax around attention's) to YNNPACK by default; for
    the Wan step XLA's own dot emitter and loop fusions cost less CPU time per step (1.3B
    architecture, 4 layers, same run as diffusers: fp32 0.82 of diffusers' CPU time instead of
    0.91, bf16 9.1 s instead of 10.9 s; docs/performance.md).
    """
    return {"xla_cpu_experimental_ynn_fusion_type": ""} if jax.default_backend() == "cpu" else {}


def _on_device(conditioning: Conditioning) -> Conditioning:
    return Conditioning(*(None if a is None else jnp.asarray(a, jnp.float32) for a in conditioning))


def _stack_context(context: np.ndarray, negative_context: np.ndarray | None) -> np.ndarray:
    """Conditional and unconditional embeddings stacked on the batch axis: one pass does both."""
    if negative_context is None:
        return context
    return np.concatenate([context, negative_context], axis=0)
