"""First-last-frame-to-video: `image` and `last_image`, for the channel-conditioned models whose
image cross-attention (if any) reads two images: Wan 2.1 FLF2V (its image position embedding
spans two frames' CLIP tokens) and Wan 2.2 I2V A14B (no CLIP tokens), as diffusers'
WanImageToVideoPipeline takes `last_image`. Conditioned as image-to-video, with the last frame
as the video's last and its CLIP tokens after the first's."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from wanjax.domain.conditioning import ImageConditioning
from wanjax.domain.inputs import kinds
from wanjax.domain.inputs.fields import InputField, InputRefusal
from wanjax.domain.modes.base import ModelTraits, refuse
from wanjax.domain.modes.image_to_video import IMAGE, ImageToVideo

if TYPE_CHECKING:
    from wanjax.domain.requests import GenerationRequest

FLF2V_PRESET = "wan2.1-flf2v-14b-720p"
LAST_IMAGE = InputField(
    name="last_image", flag="--last-image", kind=kinds.IMAGE, http="last_image",
    help="last frame (png/jpg), with --image: first-last-frame-to-video (Wan 2.1 FLF2V, Wan 2.2 I2V A14B)",
)  # fmt: skip


class FirstLastFrame(ImageToVideo):
    name = "first-last-frame-to-video"
    inputs = (IMAGE, LAST_IMAGE)
    selected_by = ("last_image",)

    def default_on(self, model: ModelTraits) -> bool:
        return False

    def check_request(self, request: GenerationRequest) -> None:
        if request.input("image") is None:
            refuse(LAST_IMAGE, "needs the first frame too ({image} with {given})", image=IMAGE)

    def check(self, request: GenerationRequest, model: ModelTraits) -> None:
        super().check(request, model)
        fix = f"use Wan 2.1 FLF2V (preset {FLF2V_PRESET}) or Wan 2.2 I2V A14B, or drop {{last_image}}"
        if model.image_conditioning is ImageConditioning.FIRST_FRAME:
            raise InputRefusal(f"this model (Wan 2.2 TI2V) conditions on the first frame only; {fix}", last_image=LAST_IMAGE)
        if model.transformer.uses_image_embeddings and model.transformer.pos_embed_seq_len is None:
            raise InputRefusal(
                "this model's image cross-attention reads one image (Wan 2.1 I2V) and has no position embedding "
                f"for a last frame's CLIP tokens; {fix}", last_image=LAST_IMAGE,
            )

    def last_image(self, request: GenerationRequest) -> np.ndarray | None:
        return request.input("last_image")


FIRST_LAST_FRAME = FirstLastFrame()
