"""Image-to-video: `image`, the first frame. Required by the models that condition on it
through extra channels (mask + image latents: Wan 2.1 I2V, Wan 2.2 I2V A14B, with CLIP tokens
on Wan 2.1), optional for Wan 2.2 TI2V-5B (its first latent frame is replaced)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from wanjax.domain.conditioning import Conditioning, ImageConditioning
from wanjax.domain.inputs import kinds
from wanjax.domain.inputs.fields import InputField, InputRefusal
from wanjax.domain.modes.animate.mode import ANIMATE
from wanjax.domain.modes.base import (
    GenerationMode,
    ModelTraits,
    ModeRun,
    ReceivedShapes,
    array_namespace,
)

if TYPE_CHECKING:
    from wanjax.domain.requests import GenerationRequest

IMAGE = InputField(
    name="image", flag="--image", kind=kinds.IMAGE, http="input_reference",
    help="first frame (png/jpg) for image-to-video models",
)  # fmt: skip


class ImageToVideo(GenerationMode):
    name = "image-to-video"
    inputs = (IMAGE,)
    selected_by = ("image",)

    def default_on(self, model: ModelTraits) -> bool:
        return model.image_conditioning is ImageConditioning.CHANNELS

    def check(self, request: GenerationRequest, model: ModelTraits) -> None:
        if model.transformer.is_animate:
            raise ANIMATE.needs_its_inputs()
        if request.input("image") is None:  # a request without inputs, on a model that needs a first frame
            raise InputRefusal("this is an image-to-video model: give the first frame ({image})", image=IMAGE)
        if model.image_conditioning is ImageConditioning.NONE:
            raise InputRefusal(
                "this is a text-to-video model and takes no image; drop {image} or use an I2V/TI2V model", image=IMAGE
            )

    def encoded_frames(self, request: GenerationRequest) -> int:
        return request.num_frames

    def received(self, shapes: ReceivedShapes) -> Conditioning:
        extra = shapes.transformer.in_channels - shapes.vae.z_dim  # mask and first-frame latents
        tokens = (1, shapes.image_tokens, shapes.transformer.image_dim) if shapes.image_tokens else None
        return Conditioning(extra_channels=(1, *shapes.latent_grid, extra) if extra else None, image_context=tokens)

    def conditioning(self, run: ModeRun) -> tuple[Any, Conditioning]:
        request, autoencoder = run.request, run.parts.autoencoder
        size, image = (request.height, request.width), request.input("image")
        if run.model.image_conditioning is ImageConditioning.FIRST_FRAME:
            return run.noise, Conditioning(first_frame=autoencoder.encode_image(image, *size, num_frames=1))
        last = self.last_image(request)
        image_latents = autoencoder.encode_image(image, *size, request.num_frames, last)
        g = run.geometry
        mask = frame_mask(g.frames, g.height, g.width, run.model.vae.temporal_compression, last_frame=last is not None)
        image_context = None
        if run.parts.image_encoder is not None:
            # FLF2V: both frames' CLIP tokens as one sequence, the first frame's first (as diffusers'
            # image embedder concatenates them before its position embedding)
            tokens = run.parts.image_encoder.encode([image] if last is None else [image, last])
            image_context = tokens.reshape(1, -1, tokens.shape[-1])
        xp = array_namespace(image_latents)
        extra_channels = xp.concat([xp.asarray(mask), image_latents], axis=-1)
        return run.noise, Conditioning(extra_channels=extra_channels, image_context=image_context)

    def last_image(self, request: GenerationRequest) -> np.ndarray | None:
        """The last frame the video is conditioned on (none in this mode)."""
        return None


def frame_mask(
    latent_frames: int, height: int, width: int, temporal_compression: int, *, last_frame: bool = False
) -> np.ndarray:
    """[1, F', H', W', temporal_compression] float32: which pixel frames are given (1) or generated (0).

    Pixel frame 0 is its own latent frame, so it is repeated to fill latent frame 0's
    `temporal_compression` slots; latent frame f > 0 holds pixel frames
    (f - 1) * temporal_compression + 1 .. f * temporal_compression, one per slot. I2V gives
    frame 0; FLF2V (`last_frame`) also the last pixel frame, the last slot of the last latent
    frame (diffusers' WanImageToVideoPipeline with `last_image`).
    """
    mask = np.zeros((1, latent_frames, height, width, temporal_compression), dtype=np.float32)
    mask[:, 0] = 1.0
    if last_frame:
        mask[:, -1, :, :, -1] = 1.0
    return mask


IMAGE_TO_VIDEO = ImageToVideo()
