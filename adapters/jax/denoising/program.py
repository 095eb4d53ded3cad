"""The denoising computation of one set of Wan experts, as public pieces the denoiser composes and
tests call: the per-generation inputs, the solver's initial state, one guided step (compiled once
for every step, expert and cache schedule) and the whole loop as one `lax.scan`.

Before the loop, once per session (a request's runs: one, or a mode's segments): the text (and
I2V image) cross-attention K/V of every block for the conditional and unconditional prompts
(`use_kv_cache`), and the RoPE tables of the latent shape (`KeptInputs`). Wan 2.2's experts share one architecture, so their weights are just
arguments of the same executables.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import attrs
import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.typing import DTypeLike

from wanjax.adapters.jax.denoising.caching.feature import CacheState, StepReport
from wanjax.adapters.jax.denoising.caching.state import CacheControls
from wanjax.adapters.jax.denoising.guider import Guider
from wanjax.adapters.jax.denoising.scan_loop import PlanArrays, scan_denoise
from wanjax.adapters.jax.denoising.step import Step, StepInputs, StepModel, StepValues, denoise_step, initial_cache
from wanjax.adapters.jax.platform.compiled import CompiledFunction, xla_options
from wanjax.adapters.jax.transformer.blocks import CrossAttentionKV
from wanjax.adapters.jax.transformer.model import WanTransformer
from wanjax.adapters.jax.platform.residency import Residency
from wanjax.adapters.jax.transformer.offload import blocks_in_host_memory, in_blocks
from wanjax.adapters.jax.transformer.rope import RopeTables
from wanjax.domain.attention_call import FrameBlockCausal
from wanjax.domain.conditioning import Conditioning
from wanjax.domain.plan import SamplingPlan
from wanjax.domain.scheduling import SolverState


@attrs.frozen(kw_only=True)
class DenoiserOptions:
    """How the loop runs; none of these changes which model runs (config keys of the same names).

    use_kv_cache: cross-attention K/V computed once per generation, not in every step.
    scan_diffusion_loop: all steps as one lax.scan (no per-step progress) instead of a Python loop.
    scheduler_dtype: the dtype of the solver state and its arithmetic (the latents between steps).
    stream_blocks: the blocks' weights live in host memory and reach the device one block ahead of
      the block that runs (`offload=layers`); the program moves any that are not there yet.
    experts_off_device: each expert's weights wait in host memory and are on the device only while
      its steps run, one expert at a time (`offload=components`; with `stream_blocks` too, the
      blocks' weights stay in host memory throughout).
    """

    use_kv_cache: bool = True
    scan_diffusion_loop: bool = False
    scheduler_dtype: DTypeLike = jnp.float32
    stream_blocks: bool = False
    experts_off_device: bool = False


class DenoisingProgram:
    """The compiled pieces of denoising with `experts` (one, or Wan 2.2's two, high noise first).

    `step` runs `guided_step` and `loop` runs `scan_loop`, each compiled once per argument
    shapes; `params` holds each expert's weights where they wait between runs (`residency`),
    `working(e)` expert e's as the steps read them, `dtype` their compute dtype.
    """

    def __init__(self, experts: Sequence[WanTransformer], options: DenoiserOptions = DenoiserOptions()) -> None:
        self.model = StepModel(nnx.graphdef(experts[0]), stream_blocks=options.stream_blocks)
        self.architecture = experts[0]  # read for shapes and dtypes only
        params = tuple(nnx.split(expert)[1] for expert in experts)
        params = tuple(blocks_in_host_memory(p) for p in params) if options.stream_blocks else params
        stays_in_host = in_blocks if options.stream_blocks else Residency().stays_in_host
        self.residency = Residency(off_device=options.experts_off_device, stays_in_host=stays_in_host)
        self.params = tuple(self.residency.at_rest(p) for p in params)
        self._at_work: tuple[int, nnx.State] | None = None
        self._one_run = threading.Lock()
        self.dtype = experts[0].dtype
        self.options = options
        self._rope_tables = experts[0].rope_tables
        self._in_channels = experts[0].spec.in_channels
        compiler = xla_options()
        self.cross_kv = CompiledFunction(self.cross_attention_kv, compiler_options=compiler)
        self.step = CompiledFunction(self.guided_step, compiler_options=compiler)
        self.loop = CompiledFunction(self.scan_loop, compiler_options=compiler)
        self._structured: dict[FrameBlockCausal, CompiledFunction] = {}

    @property
    def num_compiled(self) -> int:
        """Denoising executables compiled so far (the KV-cache builder not counted)."""
        structured = sum(step.num_compiled for step in self._structured.values())
        return self.step.num_compiled + self.loop.num_compiled + structured

    def step_for(self, structure: FrameBlockCausal | None) -> CompiledFunction:
        """`step`, or with the blocks' self-attention of this structure (SkyReels-V2's causal
        blocks): the structure is static, so each compiles its own step."""
        if structure is None:
            return self.step
        if structure not in self._structured:
            model = attrs.evolve(self.model, structure=structure)
            self._structured[structure] = CompiledFunction(
                lambda step, state, cache: denoise_step(model, step, state, cache), compiler_options=xla_options()
            )
        return self._structured[structure]

    def working(self, expert: int, *, abstract: bool = False) -> nnx.State:
        """Expert `expert`'s weights placed for its steps. With `experts_off_device`, a device copy
        made when that expert starts working, the previous expert's copy dropped first, so the device
        holds one expert at a time (`release` drops the last); `abstract`: their shapes, nothing copied."""
        params = self.params[expert]
        if abstract:
            return self.residency.working_shapes(params)
        if not self.residency.off_device:
            return params
        if self._at_work is None or self._at_work[0] != expert:
            self._at_work = None
            self._at_work = (expert, self.residency.working(params))
        return self._at_work[1]

    @property
    def expert_at_work(self) -> int | None:
        """The expert whose device copy `working` holds (None: none held, or weights not moved)."""
        return None if self._at_work is None else self._at_work[0]

    def release(self) -> None:
        """Drops the working expert's device copy (the run is over)."""
        self._at_work = None

    @contextmanager
    def run(self) -> Iterator[None]:
        """One denoising run: with `experts_off_device` the only one at a time (the working expert's
        copy is the program's, so concurrent runs would trade it back and forth), its copy released
        at the end; otherwise nothing is held and runs overlap freely."""
        if not self.residency.off_device:
            yield
            return
        with self._one_run:
            try:
                yield
            finally:
                self.release()

    def loop_segments(self, plan: SamplingPlan) -> list[tuple[int, slice]]:
        """The runs of consecutive steps the scan loop runs as one: all steps, or with
        `experts_off_device` each expert's steps apart (its weights moved in between)."""
        experts = list(plan.experts)
        if not self.residency.off_device:
            return [(experts[0], slice(0, len(experts)))]
        starts = [i for i in range(len(experts)) if i == 0 or experts[i] != experts[i - 1]]
        return [(experts[a], slice(a, b)) for a, b in zip(starts, [*starts[1:], len(experts)])]

    def loop_params(self, expert: int, *, abstract: bool = False) -> tuple[nnx.State, ...]:
        """The scan loop's weights for a segment of `expert`'s steps: every expert's as they are, or
        with `experts_off_device` the working expert's in each expert's place (the others' never run)."""
        if not self.residency.off_device:
            return self.params
        return (self.working(expert, abstract=abstract),) * len(self.params)

    def initial_state(self, plan: SamplingPlan, latents: Any) -> SolverState:
        return plan.solver.initial_state(jnp.asarray(latents, self.options.scheduler_dtype))

    def initial_cache(self, controls: CacheControls, sample: jax.Array, inputs: StepInputs) -> CacheState:
        """The step cache's state before the first step (empty for a dense plan)."""
        return initial_cache(self.architecture, controls, sample, inputs)

    def inputs(
        self,
        latent_shape: tuple[int, ...],
        context: np.ndarray,
        negative_context: np.ndarray | None,
        conditioning: Conditioning,
        *,
        abstract: bool = False,
        kept: KeptInputs | None = None,
    ) -> StepInputs:
        """The per-generation inputs. `abstract` (for compiling): the KV cache as shapes only, its
        builder compiled but not run. `kept`: what earlier runs of the same session made (the text
        rows, the RoPE tables of a latent shape, the cross-attention K/V of the same prompts and image
        context), taken from there and left there for the next."""
        kept = KeptInputs() if kept is None else kept
        guider = Guider.for_prompts(negative_context)
        contexts = kept.made(("text rows", context, negative_context),
                             lambda: jnp.asarray(guider.text_rows(context, negative_context)))  # [copies * B, L, text_dim]  # fmt: skip
        c = _on_device(conditioning)
        model_input_shape = (*latent_shape[:-1], self._in_channels)  # the extra channels included
        rope = kept.made(("rope", model_input_shape),
                         lambda: RopeTables(*(jnp.asarray(a) for a in self._rope_tables(model_input_shape))))  # fmt: skip
        if not self.options.use_kv_cache:
            return StepInputs((contexts,) * len(self.params), c, rope)
        image_context = guider.field_rows(c, "image_context")
        text = kept.made(("cross-attention K/V", abstract, contexts, conditioning.image_context),
                         lambda: self._text_kv(contexts, image_context, abstract=abstract))  # fmt: skip
        return StepInputs(text, c._replace(image_context=None), rope)

    def _text_kv(self, contexts: jax.Array, image_context: jax.Array | None, *, abstract: bool) -> tuple[Any, ...]:
        """Every expert's cross-attention K/V of the text (and image) context (`abstract`: shapes)."""
        if abstract:
            params = [self.working(e, abstract=True) for e in range(len(self.params))]
            text = tuple(jax.eval_shape(self.cross_attention_kv, p, contexts, image_context) for p in params)
            self.cross_kv.prepare(params[0], contexts, image_context)
            return text
        # the last expert first: the first, which the loop starts with, is then at work already
        order = range(len(self.params) - 1, -1, -1)
        return tuple(reversed([self.cross_kv(self.working(e), contexts, image_context) for e in order]))

    def step_arguments(
        self,
        state: SolverState,
        plan: SamplingPlan,
        i: int,
        inputs: StepInputs,
        cache: CacheState = CacheState(),
        controls: CacheControls | None = None,
        *,
        abstract: bool = False,
    ) -> tuple[Step, SolverState, CacheState]:
        """The arguments of `step` for step i; `cache` as the previous step left it (empty for a
        dense plan), `controls` the plan's (`CacheControls.of(plan.cache)`, made once per run);
        `abstract`: the weights as shapes (to compile for)."""
        expert = plan.experts[i]
        values = StepValues(plan.solver.row(i), plan.timesteps[i], plan.guidance_scales[i], np.int32(expert))
        controls = (CacheControls.of(plan.cache) if controls is None else controls).at(i)
        params = self.working(expert, abstract=abstract)
        return Step.of(params, values, controls, inputs, expert), state, cache

    def cross_attention_kv(
        self, params: nnx.State, contexts: jax.Array, image_context: jax.Array | None
    ) -> CrossAttentionKV:
        model = nnx.merge(self.model.graphdef, params)
        image_context = None if image_context is None else image_context.astype(self.dtype)
        return model.cross_attention_kv(contexts.astype(self.dtype), image_context, stream=self.model.stream_blocks)

    def guided_step(
        self, step: Step, state: SolverState, cache: CacheState
    ) -> tuple[SolverState, CacheState, StepReport]:
        """One step of `denoise_step` (arguments: `step_arguments`)."""
        return denoise_step(self.model, step, state, cache)

    def scan_loop(
        self,
        params: tuple[nnx.State, ...],
        state: SolverState,
        steps: PlanArrays,
        inputs: StepInputs,
        cache: CacheState,
    ) -> tuple[SolverState, CacheState, StepReport]:
        """The steps of `steps` (`PlanArrays.of(plan)`, or a segment of it) as one `lax.scan`, from
        `state` and `cache` (`initial_cache` before the first step)."""
        return scan_denoise(self.model, params, state, steps, inputs, cache)


class KeptInputs:
    """What the runs of one denoising session make once and share, each value by what it was made
    of: arrays by identity (a session's prompts and image context are the same objects run after
    run; each is held here, so its identity is not reused), shapes and flags by value."""

    def __init__(self) -> None:
        self._values: dict[tuple[Any, ...], tuple[tuple[Any, ...], Any]] = {}

    def made(self, of: tuple[Any, ...], make: Callable[[], Any]) -> Any:
        key = tuple(part if isinstance(part, (str, bool, tuple, type(None))) else id(part) for part in of)
        if key not in self._values:
            self._values[key] = (of, make())
        return self._values[key][1]


def _on_device(conditioning: Conditioning) -> Conditioning:
    return conditioning.map(lambda a, split: jnp.asarray(a, jnp.float32))
