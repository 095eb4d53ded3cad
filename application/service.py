"""The generation service: load once, generate many. Every entrypoint and embedding calls this."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import attrs
import numpy as np

from wanjax.adapters.text_embeddings import CachedTextEncoder
from wanjax.application.prompts import encode_prompts, encoder_batches
from wanjax.application.vace import reference_frames, request_control, vace_geometry
from wanjax.domain.batch import shared_request
from wanjax.domain.caching.calibration import CalibratedCurve, calibrate_curve
from wanjax.domain.caching.report import CacheRunReport
from wanjax.domain.conditioning import Conditioning, ImageConditioning, first_frame_mask
from wanjax.domain.errors import InvalidRequestError
from wanjax.domain.latents import LatentGeometry
from wanjax.domain.plan import plan_sampling
from wanjax.domain.ports import Denoiser, ImageEncoder, StepCallback, TextEncoder, VideoAutoencoder
from wanjax.domain.requests import GenerationRequest
from wanjax.domain.sharding import MeshShape
from wanjax.domain.specs import TransformerSpec, VaeSpec
from wanjax.domain.tracing import TimingTrace
from wanjax.domain.warmup import warmup_request

OUTPUT_TYPES = ("frames", "latent")


@attrs.frozen
class GenerationResult:
    """Frames [B, F, H, W, 3] uint8, or (output_type "latent") latents [B, C, F', H', W'] float32.

    cache_report: what each denoising step ran under the request's cache policy.
    calibration: with magcache_calibration, the MagCache curve this run measured.
    """

    array: np.ndarray
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
    mesh_shape: MeshShape = attrs.field(factory=MeshShape)


@attrs.frozen
class LoadedModel:
    text_encoder: TextEncoder
    denoiser: Denoiser
    autoencoder: VideoAutoencoder
    image_encoder: ImageEncoder | None


class GenerationService:
    """Turns validated requests into videos with one loaded model. Safe to call from any number
    of threads: the first call to need the model loads it while the others wait, and each call's
    result (and cache report) is its own."""

    def __init__(
        self,
        components: ModelComponents,
        *,
        max_sequence_length: int,
        batched_text_encoder: bool = True,
        preflight: Callable[[], None] | None = None,
    ) -> None:
        """`preflight` (the container's `Preflight.check`) checks the config against everything that
        needs no weights; every run calls it (in `check`) before loading anything."""
        self._components = components
        self._max_sequence_length = max_sequence_length
        self._batched_text_encoder = batched_text_encoder
        self._preflight = preflight
        self._loaded: LoadedModel | None = None
        self._loading = threading.Lock()

    def check(self, requests: Sequence[GenerationRequest]) -> None:
        """Raises now what `generate_batch(requests)` would raise before its first step, loading
        nothing: the batch, its latent geometry, its split over the mesh, and (first time) the
        config's own checks (`preflight`)."""
        request = shared_request(requests)
        geometry = self.geometry(request)
        c = self._components
        rows = len(requests) * (2 if request.uses_guidance else 1)
        grid = (geometry.frames, geometry.height, geometry.width)
        c.mesh_shape.check_generation(rows, grid, c.transformer_spec.patch_size)
        if self._preflight is not None:
            self._preflight()

    def geometry(self, request: GenerationRequest) -> LatentGeometry:
        """The latent shape of `request`; raises before any load if the model cannot make it."""
        c = self._components
        mode = c.image_conditioning
        if request.image is None and mode is ImageConditioning.CHANNELS:
            raise InvalidRequestError("this is an image-to-video model: give the first frame (--image PATH)")
        if request.image is not None and mode is ImageConditioning.NONE:
            raise InvalidRequestError(
                "this is a text-to-video model and takes no image; drop --image or use an I2V/TI2V model"
            )
        return vace_geometry(request, c.transformer_spec, LatentGeometry.of(request, c.transformer_spec, c.vae_spec))

    def load(self, trace: TimingTrace | None = None) -> LoadedModel:
        """Builds every component once. The transformer(s), then the VAE, load on this thread while
        the text and image encoders (torch, host memory) load on another: their loading hides
        behind the transformer's conversion. The `load` span ends when both are done. Concurrent
        calls load once: the others wait for it (and record no `load` span).

        The builders share only immutable, already-built values (the checkpoint, the dtype
        name), so building them on two threads is safe."""
        return self._load(trace, None)

    def _load(self, trace: TimingTrace | None, prompt_batches: list[list[str]] | None) -> LoadedModel:
        """`load`; a text encoder with cached embeddings (`CachedTextEncoder`) builds the encoder it
        wraps only if some of `prompt_batches` (None: not known yet) is not cached."""
        with self._loading:
            if self._loaded is None:
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
                encoders = pool.submit(lambda: (build_text_encoder(), c.image_encoder()))
                denoiser = c.denoiser()
                autoencoder = c.autoencoder()
                text_encoder, image_encoder = encoders.result()
            return LoadedModel(text_encoder, denoiser, autoencoder, image_encoder)

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
        return self._run(shorts, shared_request(requests), initial_latents, output_type, None).trace

    def generate(
        self,
        request: GenerationRequest,
        *,
        initial_latents: np.ndarray | None = None,
        output_type: str = "frames",
        on_step: StepCallback | None = None,
    ) -> GenerationResult:
        """`initial_latents` are noise in diffusers' layout [B, C, F', H', W'] (else drawn from the seed)."""
        return self._run([request], request, initial_latents, output_type, on_step)

    def generate_batch(
        self,
        requests: Sequence[GenerationRequest],
        *,
        initial_latents: np.ndarray | None = None,
        output_type: str = "frames",
        on_step: StepCallback | None = None,
    ) -> GenerationResult:
        """B videos in one run, row i of the result from requests[i]: each its own prompt, negative
        prompt and seed (its noise is what `generate` would draw), all else shared (`shared_request`).
        The compiled step depends on B, never on the prompts or seeds."""
        return self._run(requests, shared_request(requests), initial_latents, output_type, on_step)

    def _run(
        self,
        requests: Sequence[GenerationRequest],
        compiled_for: GenerationRequest,
        initial_latents: np.ndarray | None,
        output_type: str,
        on_step: StepCallback | None,
    ) -> GenerationResult:
        """Runs `requests` as one batch; the denoising executables are prepared for `compiled_for`'s
        plan (the same request, or the full run a warm-up stands in for)."""
        if output_type not in OUTPUT_TYPES:
            raise InvalidRequestError(f"output_type={output_type!r}: must be one of {', '.join(OUTPUT_TYPES)}")
        self.check(requests)
        request = shared_request(requests)
        geometry = attrs.evolve(self.geometry(request), batch=len(requests))
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
            conditioning = _repeated(self._image_conditioning(request, geometry, model), len(requests))
            if initial_latents is None:
                latents: Any = _noise(model.denoiser, requests, geometry)
            else:
                latents = geometry.from_diffusers_layout(initial_latents)

        with trace.span("compile"):
            model.denoiser.prepare(latents, full_plan, context, negative_context, conditioning)
        with trace.span("denoise"):
            denoised = model.denoiser.denoise(latents, plan, context, negative_context, on_step, conditioning)
        latents, report = denoised.latents, denoised.cache_report
        references = reference_frames(request)
        calibration = None
        if request.cache.magcache_calibration:
            calibration = calibrate_curve(report.residual_norms, plan.experts)
        if output_type == "latent":
            array = geometry.to_diffusers_layout(np.asarray(latents))
        else:
            latents = latents[:, references:]  # VACE: the reference images' frames are not video
            with trace.span("compile"):
                model.autoencoder.prepare(latents)
            with trace.span("vae_decode"):
                array = model.autoencoder.decode_to_uint8(latents)
        return GenerationResult(array, output_type, trace, cache_report=report, calibration=calibration)

    def _image_conditioning(
        self, request: GenerationRequest, geometry: LatentGeometry, model: LoadedModel
    ) -> Conditioning:
        image, mode = request.image, self._components.image_conditioning
        if self._components.transformer_spec.is_vace:
            control = request_control(request, model.autoencoder, self._components.vae_spec)
            return Conditioning(control=control)
        if image is None:
            return Conditioning()
        size = (request.height, request.width)
        if mode is ImageConditioning.FIRST_FRAME:
            return Conditioning(first_frame=model.autoencoder.encode_image(image, *size, num_frames=1))
        image_latents = np.asarray(model.autoencoder.encode_image(image, *size, num_frames=request.num_frames))
        mask = first_frame_mask(geometry.frames, geometry.height, geometry.width, self._components.vae_spec.temporal_compression)
        image_context = model.image_encoder.encode([image]) if model.image_encoder is not None else None
        return Conditioning(extra_channels=np.concatenate([mask, image_latents], axis=-1), image_context=image_context)


def _noise(denoiser: Denoiser, requests: Sequence[GenerationRequest], geometry: LatentGeometry) -> Any:
    """[B, F', H', W', C]: row i is the noise `requests[i]` alone would start from."""
    one = (1, *geometry.shape[1:])
    if len(requests) == 1:
        return denoiser.noise(requests[0].seed, one)
    return np.concatenate([np.asarray(denoiser.noise(r.seed, one)) for r in requests])


def _repeated(conditioning: Conditioning, batch: int) -> Conditioning:
    """The image conditioning (one image) repeated for every video of the batch."""
    if batch == 1:
        return conditioning
    return Conditioning(*(None if a is None else np.repeat(np.asarray(a), batch, axis=0) for a in conditioning))
