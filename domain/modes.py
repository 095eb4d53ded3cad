"""Which inputs a model takes: the generation modes a checkpoint can run, checked before loading.

text-to-video: no input media. Image-to-video: `image` (the first frame), required by the
models that condition on it through extra channels, optional for Wan 2.2 TI2V-5B.
First-last-frame-to-video: `image` and `last_image`, for the channel-conditioned models
whose image cross-attention (if any) reads two images: Wan 2.1 FLF2V (its image position
embedding spans two frames' CLIP tokens) and Wan 2.2 I2V A14B (no CLIP tokens), as
diffusers' WanImageToVideoPipeline takes `last_image`. Video-to-video: `video`, for the
models that generate from text (Wan 2.1 T2V, Wan 2.2 T2V A14B and TI2V-5B), as
diffusers' WanVideoToVideoPipeline.
"""

from __future__ import annotations

from wanjax.domain.conditioning import ImageConditioning
from wanjax.domain.errors import InvalidRequestError
from wanjax.domain.requests import GenerationRequest
from wanjax.domain.specs import TransformerSpec

FLF2V_PRESET = "wan2.1-flf2v-14b-720p"


def check_inputs(request: GenerationRequest, mode: ImageConditioning, transformer: TransformerSpec) -> None:
    """InvalidRequestError, naming the fix, when the model (`mode`, `transformer`) cannot run
    what `request` gives it."""
    if request.video is not None and mode is ImageConditioning.CHANNELS:
        raise InvalidRequestError(
            "this is an image-to-video model; video-to-video (--video) runs on a text-to-video model "
            "(Wan 2.1 T2V, Wan 2.2 T2V A14B or TI2V-5B)"
        )
    if request.image is None and mode is ImageConditioning.CHANNELS:
        raise InvalidRequestError("this is an image-to-video model: give the first frame (--image PATH)")
    if request.image is not None and mode is ImageConditioning.NONE:
        raise InvalidRequestError(
            "this is a text-to-video model and takes no image; drop --image or use an I2V/TI2V model"
        )
    if request.last_image is not None:  # with `image`, so the model takes images (CHANNELS or FIRST_FRAME)
        _check_last_frame(mode, transformer)


def _check_last_frame(mode: ImageConditioning, transformer: TransformerSpec) -> None:
    fix = f"use Wan 2.1 FLF2V (preset {FLF2V_PRESET}) or Wan 2.2 I2V A14B, or drop --last-image"
    if mode is ImageConditioning.FIRST_FRAME:
        raise InvalidRequestError(f"this model (Wan 2.2 TI2V) conditions on the first frame only; {fix}")
    if transformer.uses_image_embeddings and transformer.pos_embed_seq_len is None:
        raise InvalidRequestError(
            "this model's image cross-attention reads one image (Wan 2.1 I2V) and has no position embedding "
            f"for a last frame's CLIP tokens; {fix}"
        )
