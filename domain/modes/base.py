"""What a generation mode is: its input fields, its rules, its latent geometry, what its
conditioning gives the model and, where it needs to, its own generation loop.

A mode is written against the ports (domain/ports.py) and never imports a backend; the service
hands it the loaded model's parts and a `denoise` and a `decode` that do the rest (LoRAs,
compilation, timing). `registry.MODES` is the one table of modes.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import attrs
import numpy as np

from wanjax.domain.conditioning import Conditioning, ImageConditioning
from wanjax.domain.errors import InvalidRequestError
from wanjax.domain.specs import TransformerSpec, VaeSpec

if TYPE_CHECKING:
    from wanjax.domain.caching.report import CacheRunReport
    from wanjax.domain.latents import LatentGeometry
    from wanjax.domain.plan import SamplingPlan
    from wanjax.domain.ports import Denoised, Denoiser, ImageEncoder, VideoAutoencoder
    from wanjax.domain.requests import GenerationRequest


class InputKind(enum.Enum):
    """How an input field's file is read (adapters/media/mode_inputs.py) and the pixels it gives."""

    IMAGE = "image"  # one png/jpg, RGB uint8 [H, W, 3] at its own size
    VIDEO = "video"  # mp4 or a frame folder: its first num_frames frames, uint8 [F, H, W, 3] at its own size
    SIZED_VIDEO = "sized_video"  # a VIDEO stretched to the request's size
    MASK = "mask"  # a SIZED_VIDEO's first channel, uint8 [F, H, W] (white: 255)
    CANVAS_IMAGES = "canvas_images"  # repeatable IMAGEs, each fitted onto a white canvas of the request's size
    WHOLE_VIDEO = "whole_video"  # a VIDEO's every frame (however many), at its own size
    WHOLE_SIZED_VIDEO = "whole_sized_video"  # a WHOLE_VIDEO stretched to the request's size
    WHOLE_MASK = "whole_mask"  # a WHOLE_SIZED_VIDEO's first channel, uint8 [F, H, W] (white: 255)

    @property
    def is_video(self) -> bool:
        """Its file is a video (an mp4 over HTTP)."""
        return self in (InputKind.VIDEO, InputKind.SIZED_VIDEO, InputKind.MASK, *WHOLE_VIDEOS)

    @property
    def is_fitted(self) -> bool:
        """Its pixels are at the request's size, whatever its file's (stretched or on a canvas)."""
        return self not in (InputKind.IMAGE, InputKind.VIDEO, InputKind.WHOLE_VIDEO)

    @property
    def is_whole(self) -> bool:
        """Every frame of its video is read, however many (not the first num_frames)."""
        return self in WHOLE_VIDEOS

    def check(self, name: str, pixels: Any) -> None:
        """InvalidRequestError, naming input `name`, where `pixels` are not what this kind gives."""
        if self is InputKind.CANVAS_IMAGES:
            if not isinstance(pixels, tuple):
                raise InvalidRequestError(f"{name}: must be a tuple of images, uint8 arrays [H, W, 3]")
            for image in pixels:
                InputKind.IMAGE.check(name, image)
            return
        image, mask = ("RGB pixels", "[H, W, 3]"), ("a mask", "[F, H, W]")
        what, layout = {
            InputKind.IMAGE: image, InputKind.MASK: mask, InputKind.WHOLE_MASK: mask,
        }.get(self, ("RGB frames", "[F, H, W, 3]"))  # fmt: skip
        ndim, rgb = layout.count(",") + 1, layout.endswith("3]")
        if not isinstance(pixels, np.ndarray) or pixels.dtype != np.uint8 or pixels.ndim != ndim or (
            rgb and pixels.shape[-1] != 3
        ):
            given = f"<{type(pixels).__name__} {getattr(pixels, 'shape', None)}>"
            raise InvalidRequestError(f"{name}={given}: must be {what}, a uint8 array {layout}")
        if min(pixels.shape) < 1:
            raise InvalidRequestError(f"{name}=<array {pixels.shape}>: is empty")


WHOLE_VIDEOS = (InputKind.WHOLE_VIDEO, InputKind.WHOLE_SIZED_VIDEO, InputKind.WHOLE_MASK)


@attrs.frozen(kw_only=True)
class InputField:
    """One input of a mode as users give it.

    name: the mode's name for it (a GenerationRequest field where `http` is set);
    flag: the CLI's flag (`--image`); http: the HTTP API's file field, None where only the CLI
    takes it; kind: how its file is read; help: the CLI's help, for this mode."""

    name: str
    flag: str
    kind: InputKind
    help: str
    http: str | None = None

    @property
    def repeatable(self) -> bool:
        return self.kind is InputKind.CANVAS_IMAGES


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
      places Wan Animate's character."""

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
    """A generation mode. Subclasses set `name` and `inputs` and override what they change."""

    name: str = ""
    inputs: tuple[InputField, ...] = ()
    selected_by: tuple[str, ...] = ()
    """GenerationRequest fields, or names of `inputs`, that, set, select this mode (the registry asks
    in table order)."""
    settings: tuple[str, ...] = ()
    """GenerationRequest fields that only this mode reads (typed and ranged by the request's own
    validators); a request that runs in another mode leaves them at their defaults
    (`registry.check_settings`)."""

    def given(self, request: GenerationRequest) -> bool:
        """`request` sets a field (or input) that selects this mode."""
        return any(request.input(name) is not None for name in self.selected_by)

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

    def from_media(self, media: Mapping[str, Any]) -> dict[str, Any]:
        """GenerationRequest fields from this mode's inputs as read (by input name): each its own
        field, or its entry of `inputs`."""
        from wanjax.domain.requests import media_fields  # the request module imports the modes

        return media_fields(media)

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


def refuse(field: str, fix: str) -> None:
    """An InvalidRequestError about a request's input media `field`."""
    raise InvalidRequestError(f"{field}=<array>: {fix}")


def array_namespace(array: Any) -> Any:
    """The array API namespace of `array` (jax.numpy for a device array, numpy for a host one), so
    that arrays an adapter left on its device are combined there, never copied through the host."""
    return array.__array_namespace__() if hasattr(array, "__array_namespace__") else np
