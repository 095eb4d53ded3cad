"""VACE, the mode of Wan 2.1 VACE models (as diffusers' WanVACEPipeline prepares it): a
control video, a mask of what to regenerate and reference images -> the control latents
the VACE blocks read, [1, R + F', H', W', 2 z + s * s].

- The video (default: all zeros, mid-grey) is split by the binarised mask into the part to
  keep ("inactive": video where the mask is 0) and the part to regenerate ("reactive":
  video where it is 1); both are VAE-encoded, z channels each.
- The mask itself (default: all ones, regenerate everything) is folded to latent
  resolution: each s x s pixel patch becomes s * s channels (channel dy * s + dx), and
  frames are resampled nearest to the F' latent frames (torch's "nearest-exact").
- Each reference image (already on its canvas) is encoded alone as one latent frame and
  put before the video's frames with zeros as its reactive part and mask: R frames in
  all, the last reference first (diffusers prepends them one by one). The generated
  latents have R more frames; those are dropped before decoding.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np

from wanjax.domain.conditioning import Conditioning
from wanjax.domain.errors import InvalidRequestError
from wanjax.domain.extensions.vace import VACE_EXTENSION
from wanjax.domain.inputs import kinds
from wanjax.domain.inputs.fields import InputField, InputRefusal
from wanjax.domain.modes.base import GenerationMode, ModelTraits, ModeRun, ReceivedShapes

if TYPE_CHECKING:
    from wanjax.domain.latents import LatentGeometry
    from wanjax.domain.ports import VideoAutoencoder
    from wanjax.domain.requests import GenerationRequest


@attrs.frozen(eq=False)
class VaceInputs:
    """What a VACE generation is guided by, as pixels: a control video uint8 [F, H, W, 3], a mask
    uint8 [F, H, W] (white: regenerate, black: keep the video) and reference images uint8
    [H, W, 3] already on their canvas (the video size), as a request's inputs hold them
    (`vace_inputs`). Each may be absent."""

    video: np.ndarray | None = None
    mask: np.ndarray | None = None
    references: tuple[np.ndarray, ...] = attrs.field(default=(), converter=tuple)

    def check(self, num_frames: int, height: int, width: int) -> None:
        """Raises, naming the input, where one does not fit the requested video."""
        expected = {"video": (num_frames, height, width, 3), "mask": (num_frames, height, width)}
        for name, want in expected.items():
            value = getattr(self, name)
            if value is not None and (not isinstance(value, np.ndarray) or value.shape != want):
                raise InvalidRequestError(
                    f"the VACE {name} has shape {getattr(value, 'shape', None)}; this request needs {want} "
                    f"({num_frames} frames of {height}x{width})"
                )
        for index, image in enumerate(self.references):
            if not isinstance(image, np.ndarray) or image.shape != (height, width, 3):
                raise InvalidRequestError(
                    f"VACE reference image {index} has shape {getattr(image, 'shape', None)}; "
                    f"it must be on a {height}x{width} canvas ({(height, width, 3)})"
                )

    def as_unit(self) -> tuple[np.ndarray | None, np.ndarray | None, list[np.ndarray]]:
        """(video in [-1, 1], mask in [0, 1], references in [-1, 1]), float32, as diffusers normalises."""
        signed = lambda pixels: np.asarray(pixels, np.float32) / 255 * 2 - 1  # noqa: E731
        video = None if self.video is None else signed(self.video)
        mask = None if self.mask is None else np.asarray(self.mask, np.float32) / 255
        return video, mask, [signed(r) for r in self.references]


def binary_mask(mask: np.ndarray) -> np.ndarray:
    """mask [..] in [0, 1] -> 1.0 where > 0.5, else 0.0 (float32)."""
    return (np.asarray(mask) > 0.5).astype(np.float32)


def masked_videos(video: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """video [F, H, W, 3] in [-1, 1] and mask [F, H, W] in [0, 1] -> (inactive, reactive)
    videos [1, F, H, W, 3]: what to keep (mask 0) and what to regenerate (mask 1)."""
    if video.shape[:3] != mask.shape:
        raise ValueError(f"the mask {mask.shape} must have the video's frames and size {video.shape[:3]}")
    keep = binary_mask(mask)[..., None]
    video = np.asarray(video, np.float32)
    return (video * (1 - keep))[None], (video * keep)[None]


def nearest_frames(frames: int, latent_frames: int) -> np.ndarray:
    """The source frame of each of `latent_frames` outputs, resampling `frames` nearest with
    pixel centres aligned (torch's interpolate mode="nearest-exact")."""
    scale = frames / latent_frames
    return np.minimum(np.floor((np.arange(latent_frames) + 0.5) * scale).astype(np.int64), frames - 1)


def mask_latents(mask: np.ndarray, temporal: int, spatial: int) -> np.ndarray:
    """mask [F, H, W] in [0, 1] -> [F', H / s, W / s, s * s] float32, F' = ceil(F / temporal)."""
    frames, height, width = mask.shape
    if height % spatial or width % spatial:
        raise ValueError(f"mask size {height}x{width} is not a multiple of the VAE's {spatial}")
    folded = np.asarray(mask, np.float32).reshape(frames, height // spatial, spatial, width // spatial, spatial)
    folded = folded.transpose(0, 1, 3, 2, 4).reshape(frames, height // spatial, width // spatial, spatial * spatial)
    return folded[nearest_frames(frames, -(-frames // temporal))]


def control_latents(
    inactive: np.ndarray, reactive: np.ndarray, mask: np.ndarray, references: Sequence[np.ndarray] = ()
) -> np.ndarray:
    """inactive and reactive latents [1, F', H', W', z], the folded mask [F', H', W', s * s] and
    each reference's latents [1, 1, H', W', z] -> control latents [1, R + F', H', W', 2 z + s * s]."""
    video = np.concatenate([inactive, reactive, mask[None]], axis=-1)
    for reference in references:
        empty = np.zeros((*reference.shape[:-1], video.shape[-1] - reference.shape[-1]), np.float32)
        video = np.concatenate([np.concatenate([reference, empty], axis=-1), video], axis=1)
    return video.astype(np.float32)


def vace_control(
    autoencoder: VideoAutoencoder,
    video: np.ndarray | None,
    mask: np.ndarray | None,
    references: Sequence[np.ndarray],
    *,
    frames: int,
    height: int,
    width: int,
    temporal: int,
    spatial: int,
) -> np.ndarray:
    """Control latents [1, R + F', H', W', 2 z + s * s] of a video [F, H, W, 3] in [-1, 1] (None:
    mid-grey), a mask [F, H, W] in [0, 1] (None: regenerate everything) and R reference images
    [H, W, 3] in [-1, 1] on their canvas; `temporal` and `spatial` are the VAE's compression."""
    video = np.zeros((frames, height, width, 3), np.float32) if video is None else video
    mask = np.ones((frames, height, width), np.float32) if mask is None else mask
    inactive, reactive = (np.asarray(autoencoder.encode_video(v)) for v in masked_videos(video, mask))
    encoded = [np.asarray(autoencoder.encode_video(np.asarray(r, np.float32)[None, None])) for r in references]
    return control_latents(inactive, reactive, mask_latents(mask, temporal, spatial), encoded)


CONTROL_VIDEO = InputField(
    name="control_video", flag="--video", kind=kinds.SIZED_VIDEO, help="on VACE models the control video"
)
MASK = InputField(
    name="mask", flag="--mask", kind=kinds.MASK, help="VACE models: a mask video, white where to regenerate"
)
REFERENCE_IMAGES = InputField(
    name="reference_image", flag="--reference-image", kind=kinds.CANVAS_IMAGES,
    help="VACE models: a reference image (png/jpg); repeatable",
)  # fmt: skip


class Vace(GenerationMode):
    """A Wan 2.1 VACE model's generation: from its control video, mask and reference images (each
    optional: none given, diffusers' defaults regenerate everything from a mid-grey video)."""

    name = "VACE"
    inputs = (CONTROL_VIDEO, MASK, REFERENCE_IMAGES)
    selected_by = ("control_video", "mask", "reference_image")

    def default_on(self, model: ModelTraits) -> bool:
        return model.transformer.is_vace

    def check_request(self, request: GenerationRequest) -> None:
        vace_inputs(request).check(request.num_frames, request.height, request.width)

    def check_model(self, model: ModelTraits) -> None:
        if not model.transformer.is_vace:
            raise InputRefusal(
                "{video}, {mask} and {reference_image} guide a Wan 2.1 VACE model; this model has no VACE "
                "blocks: use one (e.g. --model wan2.1-vace-1.3b) or drop them",
                video=CONTROL_VIDEO, mask=MASK, reference_image=REFERENCE_IMAGES,
            )

    def geometry(self, request: GenerationRequest, geometry: LatentGeometry) -> LatentGeometry:
        return attrs.evolve(geometry, frames=geometry.frames + self.reference_frames(request))

    def encoded_frames(self, request: GenerationRequest) -> int:
        return request.num_frames  # the control video, mid-grey where none is given

    def received(self, shapes: ReceivedShapes) -> Conditioning:
        control = (1, *shapes.latent_grid, shapes.transformer.vace_in_channels)
        return Conditioning(extensions=VACE_EXTENSION.given(control=control))

    def conditioning(self, run: ModeRun) -> tuple[Any, Conditioning]:
        request, vae = run.request, run.model.vae
        video, mask, references = vace_inputs(request).as_unit()
        control = vace_control(
            run.parts.autoencoder, video, mask, references, frames=request.num_frames, height=request.height,
            width=request.width, temporal=vae.temporal_compression, spatial=vae.spatial_compression,
        )  # fmt: skip
        return run.noise, Conditioning(extensions=VACE_EXTENSION.given(control=control))

    def video_latents(self, request: GenerationRequest, latents: Any) -> Any:
        return latents[:, self.reference_frames(request) :]  # the reference images' frames are not video

    @staticmethod
    def reference_frames(request: GenerationRequest) -> int:
        """The latent frames the reference images add before the video's."""
        return len(request.input("reference_image") or ())


def vace_inputs(request: GenerationRequest) -> VaceInputs:
    """The request's VACE inputs (each may be absent)."""
    return VaceInputs(
        video=request.input("control_video"), mask=request.input("mask"),
        references=request.input("reference_image") or (),
    )  # fmt: skip


VACE = Vace()
