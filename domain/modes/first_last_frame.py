"""First-last-frame-to-video: `image` and `last_image`, for the channel-conditioned models whose
image cross-attention (if any) reads two images: Wan 2.1 FLF2V (its image position embedding
spans two frames' CLIP tokens) and Wan 2.2 I2V A14B (no CLIP tokens), as diffusers'
WanImageToVideoPipeline takes `last_image`. Conditioned as image-to-video, with the last frame
as the video's last and its CLIP tokens after the first's."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from wanjax.domain.conditioning import ImageConditioning
from wanjax.domain.errors import InvalidRequestError
from wanjax.domain.modes.base import InputField, InputKind, ModelTraits, refuse
from wanjax.domain.modes.image_to_video import IMAGE, ImageToVideo

if TYPE_CHECKING:
    from wanjax.domain.requests import GenerationRequest

FLF2V_PRESET = "wan2.1-flf2v-14b-720p"
LAST_IMAGE = InputField(
    name="last_image", flag="--last-image", kind=InputKind.IMAGE, http="last_image",
    help="last frame (png/jpg), with --image: first-last-frame-to-video (Wan 2.1 FLF2V, Wan 2.2 I2V A14B)",
)  # fmt: skip


class FirstLastFrame(ImageToVideo):
    name = "first-last-frame-to-video"
    inputs = (IMAGE, LAST_IMAGE)
    selected_by = ("last_image",)

    def default_on(self, model: ModelTraits) -> bool:
        return False

    def check_request(self, request: GenerationRequest) -> None:
        if request.image is None:
            refuse("last_image", "needs the first frame too (--image PATH with --last-image PATH)")

    def check(self, request: GenerationRequest, model: ModelTraits) -> None:
        super().check(request, model)
        fix = f"use Wan 2.1 FLF2V (preset {FLF2V_PRESET}) or Wan 2.2 I2V A14B, or drop --last-image"
        if model.image_conditioning is ImageConditioning.FIRST_FRAME:
            raise InvalidRequestError(f"this model (Wan 2.2 TI2V) conditions on the first frame only; {fix}")
        if model.transformer.uses_image_embeddings and model.transformer.pos_embed_seq_len is None:
            raise InvalidRequestError(
                "this model's image cross-attention reads one image (Wan 2.1 I2V) and has no position embedding "
                f"for a last frame's CLIP tokens; {fix}"
            )

    def last_image(self, request: GenerationRequest) -> np.ndarray | None:
        return request.last_image


FIRST_LAST_FRAME = FirstLastFrame()
