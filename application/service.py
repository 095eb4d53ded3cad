"""The generation service: load once, generate many. Every entrypoint and embedding calls this."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import numpy as np

from wanjax.domain.conditioning import Conditioning, ImageConditioning, first_frame_mask
from wanjax.domain.errors import InvalidRequestError
from wanjax.domain.latents import LatentGeometry
from wanjax.domain.plan import plan_sampling
from wanjax.domain.ports import Denoiser, ImageEncoder, StepCallback, TextEncoder, VideoAutoencoder
from wanjax.domain.requests import GenerationRequest
from wanjax.domain.specs import TransformerSpec, VaeSpec
from wanjax.domain.tracing import TimingTrace

OUTPUT_TYPES = ("frames", "latent")


@attrs.frozen
class GenerationResult:
    """Frames [B, F, H, W, 3] uint8, or (output_type "latent") latents [B, C, F', H', W'] float32."""

    array: np.ndarray
    output_type: str
    trace: TimingTrace


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


@attrs.frozen
class LoadedModel:
    text_encoder: TextEncoder
    denoiser: Denoiser
    autoencoder: VideoAutoencoder
    image_encoder: ImageEncoder | None


class GenerationService:
    """Turns validated requests into videos with one loaded model."""

    def __init__(self, components: ModelComponents, *, max_sequence_length: int) -> None:
        self._components = components
        self._max_sequence_length = max_sequence_length
        self._loaded: LoadedModel | None = None

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
        return LatentGeometry.of(request, c.transformer_spec, c.vae_spec)

    def load(self, trace: TimingTrace | None = None) -> LoadedModel:
        if self._loaded is None:
            with (trace or TimingTrace()).span("load"):
                c = self._components
                self._loaded = LoadedModel(c.text_encoder(), c.denoiser(), c.autoencoder(), c.image_encoder())
        return self._loaded

    def generate(
        self,
        request: GenerationRequest,
        *,
        initial_latents: np.ndarray | None = None,
        output_type: str = "frames",
        on_step: StepCallback | None = None,
    ) -> GenerationResult:
        """`initial_latents` are noise in diffusers' layout [B, C, F', H', W'] (else drawn from the seed)."""
        if output_type not in OUTPUT_TYPES:
            raise InvalidRequestError(f"output_type={output_type!r}: must be one of {', '.join(OUTPUT_TYPES)}")
        geometry = self.geometry(request)
        if initial_latents is not None:
            geometry.check_diffusers_latents(initial_latents)
        c = self._components
        plan = plan_sampling(request, num_experts=c.num_experts, model_boundary_ratio=c.boundary_ratio)
        trace = TimingTrace()
        model = self.load(trace)

        with trace.span("conditioning"):
            prompts = [request.prompt] + ([request.negative_prompt] if request.uses_guidance else [])
            embeddings = model.text_encoder.encode(prompts, self._max_sequence_length)
            context = embeddings[:1]
            negative_context = embeddings[1:] if request.uses_guidance else None
            conditioning = self._image_conditioning(request, geometry, model)
            if initial_latents is None:
                latents: Any = model.denoiser.noise(request.seed, geometry.shape)
            else:
                latents = geometry.from_diffusers_layout(initial_latents)

        with trace.span("compile"):
            model.denoiser.prepare(latents, plan, context, negative_context, conditioning)
        with trace.span("denoise"):
            latents = model.denoiser.denoise(latents, plan, context, negative_context, on_step, conditioning)
        if output_type == "latent":
            return GenerationResult(geometry.to_diffusers_layout(np.asarray(latents)), output_type, trace)

        with trace.span("compile"):
            model.autoencoder.prepare(latents)
        with trace.span("vae_decode"):
            frames = model.autoencoder.decode_to_uint8(latents)
        return GenerationResult(frames, output_type, trace)

    def _image_conditioning(
        self, request: GenerationRequest, geometry: LatentGeometry, model: LoadedModel
    ) -> Conditioning:
        image, mode = request.image, self._components.image_conditioning
        if image is None:
            return Conditioning()
        size = (request.height, request.width)
        if mode is ImageConditioning.FIRST_FRAME:
            return Conditioning(first_frame=model.autoencoder.encode_image(image, *size, num_frames=1))
        image_latents = np.asarray(model.autoencoder.encode_image(image, *size, num_frames=request.num_frames))
        mask = first_frame_mask(geometry.frames, geometry.height, geometry.width, self._components.vae_spec.temporal_compression)
        image_context = model.image_encoder.encode([image]) if model.image_encoder is not None else None
        return Conditioning(extra_channels=np.concatenate([mask, image_latents], axis=-1), image_context=image_context)
