"""What a generation mode is: its input fields, its options, its rules, its latent geometry, what its
conditioning gives the model and, where it needs to, its own generation loop.

A mode is written against the ports (domain/ports.py) and never imports a backend; the service
hands it the loaded model's parts and a `denoise` and a `decode` that do the rest (LoRAs,
compilation, timing). `registry.MODES` is the one table of modes.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import attrs
import numpy as np

from wanjax.domain.conditioning import Conditioning, ImageConditioning
from wanjax.domain.inputs.fields import InputField, InputRefusal
from wanjax.domain.specs import TransformerSpec, VaeSpec

if TYPE_CHECKING:
    from wanjax.domain.attention_call import FrameBlockCausal
    from wanjax.domain.caching.report import CacheRunReport
    from wanjax.domain.latents import LatentGeometry
    from wanjax.domain.plan import SamplingPlan
    from wanjax.domain.ports import Denoised, Denoiser, ImageEncoder, SpeechEncoder, VideoAutoencoder
    from wanjax.domain.requests import GenerationRequest


class DescribedModel(Protocol):
    """A checkpoint, or the service's components: what they say of the model."""

    @property
    def transformer_spec(self) -> TransformerSpec: ...

    @property
    def vae_spec(self) -> VaeSpec: ...

    @property
    def image_conditioning(self) -> ImageConditioning: ...


@attrs.frozen(kw_only=True)
class ModelTraits:
    """What a mode asks of a model before loading it: its shapes and how it takes an image."""

    transformer: TransformerSpec
    vae: VaeSpec
    image_conditioning: ImageConditioning

    @classmethod
    def of(cls, model: DescribedModel) -> ModelTraits:
        return cls(transformer=model.transformer_spec, vae=model.vae_spec, image_conditioning=model.image_conditioning)


@attrs.frozen(kw_only=True)
class ReceivedShapes:
    """What the bench feeds a model of its shapes: the latent grid and the CLIP tokens it reads."""

    transformer: TransformerSpec
    vae: VaeSpec
    latent_grid: tuple[int, int, int]
    """(F', H', W') of the latents."""
    image_tokens: int


class LoadedParts(Protocol):
    """The loaded model's ports a mode's conditioning and loop use."""

    denoiser: Denoiser
    autoencoder: VideoAutoencoder
    image_encoder: ImageEncoder | None
    speech_encoder: SpeechEncoder | None


@attrs.frozen(kw_only=True)
class ModeRun:
    """One run of a batch, as the service hands it to its mode.

    requests: the batch's requests (their seeds: a mode that draws noise per segment asks
      `parts.denoiser.noise(seed, shape)`); request: what they share;
    noise: the batch's starting noise [B, F', H', W', C] (a device array where the denoiser made it);
    denoise(latents, conditioning, part=(0, 1)): the denoiser's run of `plan` over latents of this
      geometry, under the request's LoRAs (applied at the first call and held until the run ends,
      so the runs of a mode's loop share one switch), compiled as needed (conditioning of one row:
      it is repeated per video); `part` (k, n): the k-th of n alike runs (segments), whose steps the
      progress counts as those of one run;
    decode(latents): uint8 frames [B, F, H, W, 3]; None where the caller asked for latents;
    emit(frames): hands the video's next uint8 frames [B, f, H, W, 3] on, in order, as soon as they
      are decoded (the output is written as it is made: a mode holds no more than it must);
    stretch(frames, height, width): uint8 frames [F, H, W, 3] stretched to height x width as the
      input readers fit a video to the request's size (Lanczos; the frames themselves where they
      fit), for an input whose size only the model knows;
    letterbox(image, height, width, reference): an RGB uint8 image [h, w, 3] on a black canvas
      [height, width, 3], fitted (aspect kept) and placed as `reference` ("official" or "diffusers")
      places Wan Animate's character;
    cover(image, height, width): an RGB uint8 image [h, w, 3] at [height, width, 3], its short side
      resized (bilinear) and its centre cropped, as the official Wan S2V fits its reference image."""

    requests: Sequence[GenerationRequest]
    request: GenerationRequest
    model: ModelTraits
    parts: LoadedParts
    geometry: LatentGeometry
    plan: SamplingPlan
    noise: Any
    denoise: Callable[..., Denoised]
    decode: Callable[[Any], np.ndarray] | None
    emit: Callable[[np.ndarray], None]
    stretch: Callable[[np.ndarray, int, int], np.ndarray]
    letterbox: Callable[[np.ndarray, int, int, str], np.ndarray]
    cover: Callable[[np.ndarray, int, int], np.ndarray]
    span: Callable[[str], Any]
    """A timing span by name (`with run.span("conditioning"): ...`)."""


@attrs.frozen(kw_only=True)
class Generated:
    """A mode's result once its frames are emitted (`ModeRun.emit`): the final latents [B, F', H', W', C]
    (all of them, e.g. VACE's reference frames too; of a mode that decodes segment by segment, its
    last segment's, unless latents were asked for) and the run's cache report (a mode that denoises
    several times reports its last run)."""

    latents: Any
    cache_report: CacheRunReport


class GenerationMode:
    """A generation mode. Subclasses set `name`, `inputs` and `options` and override what they change."""

    name: str = ""
    inputs: tuple[InputField, ...] = ()
    options: type | None = None
    """The mode's own options: a frozen attrs class whose fields validate themselves and whose
    defaults are the mode's (None: it has none). A request of this mode holds one in `options`;
    each field is also a flat config key (`--set strength=0.6`, domain/modes/options.py)."""
    selected_by: tuple[str, ...] = ()
    """Names of `inputs` that, given, select this mode (the registry asks in table order)."""

    together: int | None = None
    """How many of its inputs a request may give at once (None: all; Diffusion Forcing: one)."""

    def takes(self, inputs: Collection[str]) -> bool:
        """Every input named in `inputs` is one of this mode's, no more of them than `together`."""
        return set(inputs) <= {field.name for field in self.inputs} and self.takes_count(len(set(inputs)))

    def takes_count(self, count: int) -> bool:
        """A request may give this many of its inputs at once."""
        return self.together is None or count <= self.together

    def given(self, request: GenerationRequest) -> bool:
        """`request` gives an input that selects this mode."""
        return any(request.input(name) is not None for name in self.selected_by)

    def options_of(self, request: GenerationRequest) -> Any:
        """The request's options of this mode: its own, else the mode's defaults."""
        if self.options is None:
            return None
        return request.options if isinstance(request.options, self.options) else self.options()

    def input_field(self, name: str) -> InputField:
        """This mode's input `name`."""
        return next(field for field in self.inputs if field.name == name)

    def default_on(self, model: ModelTraits) -> bool:
        """A request that gives no mode's inputs runs in this mode on `model` (VACE on a VACE model)."""
        return False

    def check_request(self, request: GenerationRequest) -> None:
        """Raises InvalidRequestError, naming the fix, where the request's inputs do not fit together
        or its frame count (no model needed: called on construction)."""

    def check_model(self, model: ModelTraits) -> None:
        """Raises InvalidRequestError, naming the fix, where `model` cannot run this mode at all: asked
        first, before the inputs are read (`mode_of_inputs` found the mode) or checked together."""

    def check(self, request: GenerationRequest, model: ModelTraits) -> None:
        """Raises InvalidRequestError, naming the fix, where `model` cannot run the request (before
        loading; after `check_model`)."""

    def geometry(self, request: GenerationRequest, geometry: LatentGeometry) -> LatentGeometry:
        """The latents the model denoises, from the video's own `geometry`."""
        return geometry

    def run_geometry(self, request: GenerationRequest, geometry: LatentGeometry) -> LatentGeometry:
        """The latents one denoising run holds, of the denoised `geometry` (a Diffusion Forcing window:
        the memory plan's activations)."""
        return geometry

    def attention_structure(self, request: GenerationRequest, model: ModelTraits) -> FrameBlockCausal | None:
        """The structure of the blocks' self-attention in `request`'s runs (Diffusion Forcing's causal
        blocks), which the attention kernel must honour: checked before loading."""
        return None

    def first_step(self, request: GenerationRequest, num_steps: int) -> int:
        """The first step of a `num_steps`-step schedule that the run takes."""
        return 0

    def warmup_fields(self, request: GenerationRequest) -> dict[str, Any]:
        """Fields a short warm-up run of `request` changes so that each of its steps runs."""
        return {}

    def encoded_frames(self, request: GenerationRequest) -> int:
        """Pixel frames the VAE encodes before denoising (the memory plan's encoder pass)."""
        return 0

    def output_frames(self, request: GenerationRequest) -> int:
        """Frames of the video the request makes."""
        return request.num_frames

    def segment_count(self, request: GenerationRequest) -> int:
        """Segments the request's video is made in (`segments.generate_in_segments`), each of the same
        steps; 1 for a mode that makes it in one piece."""
        return 1

    def segment_frames(self, request: GenerationRequest) -> int:
        """Frames one segment decodes: the most of a video a run holds at once (it writes each
        segment's as they come); the whole video's for a mode that makes it in one piece."""
        return self.output_frames(request)

    def received(self, shapes: ReceivedShapes) -> Conditioning:
        """The conditioning's array shapes (tuples; None where absent) a model of `shapes` receives
        in this mode at batch 1: the bench's random inputs."""
        return Conditioning()

    def conditioning(self, run: ModeRun) -> tuple[Any, Conditioning]:
        """(starting latents, conditioning of one row) of the run."""
        return run.noise, Conditioning()

    def video_latents(self, request: GenerationRequest, latents: Any) -> Any:
        """The part of the final latents that is the video (what is decoded)."""
        return latents

    def generate(self, run: ModeRun) -> Generated:
        """The generation loop: by default one denoising pass, then a decode whose frames are emitted.
        A mode that denoises in segments (each conditioned on the last) overrides this with
        `segments.generate_in_segments`."""
        with run.span("conditioning"):
            latents, conditioning = self.conditioning(run)
        denoised = run.denoise(latents, conditioning)
        if run.decode is not None:
            run.emit(run.decode(self.video_latents(run.request, denoised.latents)))
        return Generated(latents=denoised.latents, cache_report=denoised.cache_report)


def refuse(field: InputField, fix: str, **inputs: InputField) -> None:
    """An InputRefusal about the request's input `field`: `fix` may name other `inputs` as `{key}`
    (and this one as `{given}`), each named as the entrypoint that asked calls it."""
    raise InputRefusal("{given}: " + fix, given=field, **inputs)


def unit_pixels(frames: np.ndarray) -> np.ndarray:
    """uint8 pixels -> float32 in [-1, 1], as diffusers' VideoProcessor and the official code's
    ToTensor() * 2 - 1 normalise them."""
    return frames.astype(np.float32) / 255.0 * 2.0 - 1.0


def array_namespace(array: Any) -> Any:
    """The array API namespace of `array` (jax.numpy for a device array, numpy for a host one), so
    that arrays an adapter left on its device are combined there, never copied through the host."""
    return array.__array_namespace__() if hasattr(array, "__array_namespace__") else np
