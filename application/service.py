"""The generation service: load once, generate many. Every entrypoint and embedding calls this."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from typing import Any

import attrs
import numpy as np

from wanjax.adapters.media.images import covered
from wanjax.adapters.media.letterbox import character_canvas
from wanjax.adapters.media.pixel_reader import stretched
from wanjax.adapters.text_embeddings import CachedTextEncoder
from wanjax.application.prompts import encode_prompts, encoder_batches
from wanjax.domain.attention_call import SELF, AttentionCall
from wanjax.domain.batch import shared_request
from wanjax.domain.caching.calibration import CalibratedCurve, calibrate_curve
from wanjax.domain.caching.report import CacheRunReport
from wanjax.domain.conditioning import Conditioning, ImageConditioning
from wanjax.domain.errors import ConfigError, InvalidRequestError
from wanjax.domain.frame_schedule import FrameSchedule
from wanjax.domain.latents import LatentGeometry
from wanjax.domain.lora import LoraSet, loras_per_expert
from wanjax.domain.modes.base import GenerationMode, ModelTraits, ModeRun, array_namespace
from wanjax.domain.modes.registry import mode_for
from wanjax.domain.plan import plan_sampling
from wanjax.domain.ports import (
    Denoised,
    Denoiser,
    ImageEncoder,
    SpeechEncoder,
    LoraSwitch,
    FramesCallback,
    StepCallback,
    TextEncoder,
    VideoAutoencoder,
)
from wanjax.domain.requests import GenerationRequest
from wanjax.domain.settings import TextEncoderSettings
from wanjax.domain.sharding import MeshShape
from wanjax.domain.specs import TransformerSpec, VaeSpec
from wanjax.domain.tracing import TimingTrace
from wanjax.domain.warmup import warmup_request

OUTPUT_TYPES = ("frames", "latent")


@attrs.frozen
class GenerationResult:
    """Frames [B, F, H, W, 3] uint8, or (output_type "latent") latents [B, C, F', H', W'] float32;
    None where the frames went to the run's `on_frames` as they were decoded.

    cache_report: what each denoising step ran under the request's cache policy.
    calibration: with magcache_calibration, the MagCache curve this run measured.
    """

    array: np.ndarray | None
    output_type: str
    trace: TimingTrace
    cache_report: CacheRunReport | None = None
    calibration: CalibratedCurve | None = None


@attrs.frozen(kw_only=True)
class ModelComponents:
    """What a checkpoint is, and lazily built components (each callable is a container provider)."""

    transformer_spec: TransformerSpec
    vae_spec: VaeSpec
    num_experts: int
    boundary_ratio: float | None
    image_conditioning: ImageConditioning
    text_encoder: Callable[[], TextEncoder]
    denoiser: Callable[[], Denoiser]
    autoencoder: Callable[[], VideoAutoencoder]
    image_encoder: Callable[[], ImageEncoder | None]
    speech_encoder: Callable[[], SpeechEncoder | None] = lambda: None
    mesh_shape: MeshShape = attrs.field(factory=MeshShape)
    lora_check: Callable[[LoraSet], None] | None = None
    """Checks a request's LoRAs (per expert) before loading; None: requests may carry none."""
    lora_switch: Callable[[], LoraSwitch | None] = lambda: None

    @property
    def traits(self) -> ModelTraits:
        """What the generation modes ask of this model."""
        return ModelTraits.of(self)


@attrs.frozen
class LoadedModel:
    text_encoder: TextEncoder
    denoiser: Denoiser
    autoencoder: VideoAutoencoder
    image_encoder: ImageEncoder | None
    lora_switch: LoraSwitch | None = None
    speech_encoder: SpeechEncoder | None = None


class GenerationService:
    """Turns validated requests into videos with one loaded model. Safe to call from any number
    of threads: the first call to need the model loads it while the others wait, and each call's
    result (and cache report) is its own."""

    def __init__(
        self,
        components: ModelComponents,
        prompts: TextEncoderSettings = TextEncoderSettings(),
        *,
        preflight: Callable[[], None] | None = None,
        attention_check: Callable[[AttentionCall], None] | None = None,
    ) -> None:
        """`prompts` says how prompts are encoded (token length, batched or not); `preflight` (the
        container's `Preflight.check`) checks the config against everything that needs no
        weights; every run calls it (in `check`) before loading anything. `attention_check`
        (`Preflight.check_attention`) refuses a request's attention call the kernel does not honour."""
        self._components = components
        self._max_sequence_length = prompts.max_sequence_length
        self._batched_text_encoder = prompts.batched
        self._preflight = preflight
        self._attention_check = attention_check
        self._loaded: LoadedModel | None = None
        self._loading = threading.Lock()
        self._config_checked = False
        self._checking = threading.Lock()

    @property
    def traits(self) -> ModelTraits:
        """What the generation modes ask of the model (`GenerationMode.check_model`)."""
        return self._components.traits

    def check(self, requests: Sequence[GenerationRequest]) -> None:
        """Raises now what `generate_batch(requests)` would raise before its first step, loading
        nothing: the batch, its latent geometry, its sampling plan (host arithmetic: the experts'
        settings) and step cache (against the transformer), its split over the mesh, (first time)
        the config's own checks (`preflight`), its LoRAs."""
        self._check(requests)

    def _check(self, requests: Sequence[GenerationRequest]) -> LoraSet:
        """`check`, returning the batch's LoRAs by expert."""
        request = shared_request(requests)
        mode, geometry = self._mode_geometry(request)
        c = self._components
        plan_sampling(request, num_experts=c.num_experts, model_boundary_ratio=c.boundary_ratio)
        request.cache.check_model(c.transformer_spec)
        rows = len(requests) * (2 if request.uses_guidance else 1)
        grid = (geometry.frames, geometry.height, geometry.width)
        c.mesh_shape.check_generation(rows, grid, c.transformer_spec.patch_size)
        self._check_config()
        self._check_attention(mode, request, geometry)
        return self.request_loras(request)

    def _check_attention(self, mode: GenerationMode, request: GenerationRequest, geometry: LatentGeometry) -> None:
        """The blocks' self-attention of `request`'s runs, as the kernel will be asked for it."""
        structure = mode.attention_structure(request, self._components.traits)
        if structure is None or self._attention_check is None:
            return
        run = mode.run_geometry(request, geometry)
        patch = self._components.transformer_spec.patch_size
        grid = (run.frames // patch[0], run.height // patch[1], run.width // patch[2])
        self._attention_check(AttentionCall(kind=SELF, grid=grid, structure=structure))

    def request_loras(self, request: GenerationRequest) -> LoraSet:
        """`request`'s LoRAs by expert, each file checked against the model (its header and
        tensor shapes, nothing loaded); an InvalidRequestError naming the field otherwise."""
        c = self._components
        if not (request.loras or request.loras_low):
            return ((),) * c.num_experts
        if c.lora_check is None:
            field = "loras" if request.loras else "loras_low"
            raise InvalidRequestError(
                f"{field}: this model was loaded without per-request LoRAs; set request_loras=true "
                "(`wanjax serve --lora-dir DIR` does), or merge them at load with --lora"
            )
        try:
            loras = loras_per_expert(c.num_experts, request.loras, request.loras_low)
        except ConfigError as err:
            raise InvalidRequestError(str(err)) from None
        c.lora_check(loras)
        return loras

    def _check_config(self) -> None:
        """The preflight, until it has passed once; never beside the load, which it precedes: both
        build container singletons (the attention backend), whose providers are not thread-safe.
        A check while the model loads does not wait for the load."""
        with self._checking:
            if not self._config_checked and self._preflight is not None:
                self._preflight()
            self._config_checked = True

    def geometry(self, request: GenerationRequest) -> LatentGeometry:
        """The latent shape of `request`; raises before any load if the model cannot make it."""
        return self._mode_geometry(request)[1]

    def _mode_geometry(self, request: GenerationRequest) -> tuple[GenerationMode, LatentGeometry]:
        """`request`'s mode on this model (checked) and the latents it denoises."""
        c = self._components
        mode = mode_for(request, c.traits)
        return mode, mode.geometry(request, LatentGeometry.of(request, c.transformer_spec, c.vae_spec))

    def load(self, trace: TimingTrace | None = None) -> LoadedModel:
        """Builds every component once. The transformer(s), then the VAE, load on this thread while
        the text and image encoders (torch, host memory) load on another: their loading hides
        behind the transformer's conversion. The `load` span ends when both are done. Concurrent
        calls load once: the others wait for it (and record no `load` span). The config's
        preflight runs first, if no `check` has run it yet.

        The builders share only immutable, already-built values (the checkpoint, the dtype
        name), so building them on two threads is safe."""
        return self._load(trace, None)

    def _load(self, trace: TimingTrace | None, prompt_batches: list[list[str]] | None) -> LoadedModel:
        """`load`; a text encoder with cached embeddings (`CachedTextEncoder`) builds the encoder it
        wraps only if some of `prompt_batches` (None: not known yet) is not cached."""
        with self._loading:
            if self._loaded is None:
                self._check_config()
                self._loaded = self._build(trace, prompt_batches)
        return self._loaded

    def _build(self, trace: TimingTrace | None, prompt_batches: list[list[str]] | None) -> LoadedModel:
        with (trace or TimingTrace()).span("load"):
            c = self._components

            def build_text_encoder() -> TextEncoder:
                encoder = c.text_encoder()
                if isinstance(encoder, CachedTextEncoder):
                    encoder.prepare(prompt_batches, self._max_sequence_length)
                return encoder

            # Only the host-side (torch) encoders load beside the transformer: everything that
            # places arrays on the devices loads on this thread, in one order, because in a
            # multi-process run every process must issue its cross-process transfers in the
            # same order (a VAE placed while the experts were being placed ran the processes'
            # collectives out of step and aborted them in gloo).
            with ThreadPoolExecutor(max_workers=1, thread_name_prefix="wanjax-load") as pool:
                encoders = pool.submit(lambda: (build_text_encoder(), c.image_encoder(), c.speech_encoder()))
                denoiser = c.denoiser()
                autoencoder = c.autoencoder()
                lora_switch = c.lora_switch()
                text_encoder, image_encoder, speech_encoder = encoders.result()
            return LoadedModel(text_encoder, denoiser, autoencoder, image_encoder, lora_switch, speech_encoder)

    def warmup(
        self,
        requests: Sequence[GenerationRequest],
        *,
        initial_latents: np.ndarray | None = None,
        output_type: str = "frames",
    ) -> TimingTrace:
        """Loads, compiles every executable `generate_batch(requests, ...)` (or, for one request,
        `generate`) needs and runs the batch cut to two steps (both experts on Wan 2.2 A14B),
        so that the run that follows compiles nothing. The warm-up's output is dropped here:
        only its trace comes back."""
        shorts = [warmup_request(request, num_experts=self._components.num_experts) for request in requests]
        return self._run(shorts, shared_request(requests), initial_latents, output_type, None, None).trace

    def generate(
        self,
        request: GenerationRequest,
        *,
        initial_latents: np.ndarray | None = None,
        output_type: str = "frames",
        on_step: StepCallback | None = None,
        on_frames: FramesCallback | None = None,
    ) -> GenerationResult:
        """`initial_latents` are noise in diffusers' layout [B, C, F', H', W'] (else drawn from the seed).
        `on_frames(frames)`: the video's uint8 frames [B, f, H, W, 3], in order, as each part (a
        segment) is decoded; then none are held, and the result's `array` is None."""
        return self._run([request], request, initial_latents, output_type, on_step, on_frames)

    def generate_batch(
        self,
        requests: Sequence[GenerationRequest],
        *,
        initial_latents: np.ndarray | None = None,
        output_type: str = "frames",
        on_step: StepCallback | None = None,
        on_frames: FramesCallback | None = None,
    ) -> GenerationResult:
        """B videos in one run, row i of the result from requests[i]: each its own prompt, negative
        prompt and seed (its noise is what `generate` would draw), all else shared (`shared_request`).
        The compiled step depends on B, never on the prompts or seeds. `on_frames`: as `generate`'s."""
        return self._run(requests, shared_request(requests), initial_latents, output_type, on_step, on_frames)

    def _run(
        self,
        requests: Sequence[GenerationRequest],
        compiled_for: GenerationRequest,
        initial_latents: np.ndarray | None,
        output_type: str,
        on_step: StepCallback | None,
        on_frames: FramesCallback | None,
    ) -> GenerationResult:
        """Runs `requests` as one batch in one denoising session; its executables are prepared for
        `compiled_for`'s plan (the same request, or the full run a warm-up stands in for)."""
        if output_type not in OUTPUT_TYPES:
            raise InvalidRequestError(f"output_type={output_type!r}: must be one of {', '.join(OUTPUT_TYPES)}")
        loras = self._check(requests)
        request = shared_request(requests)
        mode, geometry = self._mode_geometry(request)
        geometry = attrs.evolve(geometry, batch=len(requests))
        if initial_latents is not None:
            geometry.check_diffusers_latents(initial_latents)
        c = self._components
        plan = plan_sampling(request, num_experts=c.num_experts, model_boundary_ratio=c.boundary_ratio)
        full_plan = plan_sampling(compiled_for, num_experts=c.num_experts, model_boundary_ratio=c.boundary_ratio)
        trace = TimingTrace()
        model = self._load(trace, encoder_batches(requests, batched=self._batched_text_encoder))

        with trace.span("conditioning"):
            context, negative_context = encode_prompts(
                model.text_encoder, requests, self._max_sequence_length, batched=self._batched_text_encoder
            )
            if initial_latents is None:
                noise: Any = _noise(model.denoiser, requests, geometry)
            else:
                noise = geometry.from_diffusers_layout(initial_latents)

        held_loras, holding = ExitStack(), False  # the request's LoRAs, from the first denoise to the run's end
        session = model.denoiser.session(plan, context, negative_context, compiled_for=full_plan)
        kept: list[np.ndarray] = []

        def denoise(
            latents: Any, conditioning: Conditioning, part: tuple[int, int] = (0, 1), frames: FrameSchedule | None = None
        ) -> Denoised:
            nonlocal holding
            conditioning = _repeated(conditioning, len(requests))
            steps = None if on_step is None else _spanning(on_step, *part)
            if model.lora_switch is not None and not holding:
                with trace.span("loras"):  # a switch to other LoRAs merges them here
                    held_loras.enter_context(model.lora_switch.applied(loras))
                holding = True
            with trace.span("compile"):
                session.prepare(latents, conditioning, frames=frames)
            with trace.span("denoise"):
                return session.denoise(latents, steps, conditioning, frames=frames)

        def decode(latents: Any) -> np.ndarray:
            with trace.span("compile"):
                model.autoencoder.prepare(latents)
            with trace.span("vae_decode"):
                return model.autoencoder.decode_to_uint8(latents)

        run = ModeRun(
            requests=requests, request=request, model=c.traits, parts=model, geometry=geometry, plan=plan,
            noise=noise, denoise=denoise, decode=None if output_type == "latent" else decode,
            emit=kept.append if on_frames is None else on_frames, stretch=stretched,
            letterbox=character_canvas, cover=covered, span=trace.span,
        )  # fmt: skip
        with held_loras:
            generated = mode.generate(run)
        report = generated.cache_report
        calibration = None
        if request.cache.magcache_calibration:
            calibration = calibrate_curve(report.residual_norms, plan.experts)
        if output_type == "latent":
            array = geometry.to_diffusers_layout(np.asarray(generated.latents))
        else:
            array = np.concatenate(kept, axis=1) if on_frames is None else None
        return GenerationResult(array, output_type, trace, cache_report=report, calibration=calibration)


def _spanning(on_step: StepCallback, index: int, count: int) -> StepCallback:
    """`on_step` told of run `index` of `count` alike runs (a mode's segments) as steps of them all."""
    return lambda done, total: on_step(index * total + done, count * total)


def _noise(denoiser: Denoiser, requests: Sequence[GenerationRequest], geometry: LatentGeometry) -> Any:
    """[B, F', H', W', C]: row i is the noise `requests[i]` alone would start from."""
    one = (1, *geometry.shape[1:])
    if len(requests) == 1:
        return denoiser.noise(requests[0].seed, one)
    rows = [denoiser.noise(r.seed, one) for r in requests]
    return array_namespace(rows[0]).concat(rows, axis=0)


def _repeated(conditioning: Conditioning, batch: int) -> Conditioning:
    """The image conditioning (one image) repeated for every video of the batch, where it is (each
    per-sample input: `RowSplit.batched`)."""
    if batch == 1:
        return conditioning
    return conditioning.map(lambda a, split: array_namespace(a).repeat(a, batch, axis=0) if split.batched else a)
