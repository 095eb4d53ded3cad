"""The VACE control latents of a generation: the control video, mask and reference images
encoded by the model's VAE and assembled as domain/vace.py describes."""

from __future__ import annotations

from collections.abc import Sequence

import attrs
import numpy as np

from wanjax.domain.errors import InvalidRequestError
from wanjax.domain.latents import LatentGeometry
from wanjax.domain.ports import VideoAutoencoder
from wanjax.domain.requests import GenerationRequest
from wanjax.domain.specs import TransformerSpec, VaeSpec
from wanjax.domain.vace import control_latents, mask_latents, masked_videos


def vace_geometry(request: GenerationRequest, transformer: TransformerSpec, geometry: LatentGeometry) -> LatentGeometry:
    """The latents a request makes on this transformer: a VACE model's have one more frame per
    reference image (before the video's). Raises before any load where VACE inputs are given to
    a model without VACE blocks, or do not fit the request."""
    if not transformer.is_vace:
        if request.vace is not None:
            raise InvalidRequestError(
                "--video, --mask and --reference-image guide a Wan 2.1 VACE model; this model has no VACE "
                "blocks: use one (e.g. --model wan2.1-vace-1.3b) or drop them"
            )
        return geometry
    if request.vace is None:
        return geometry
    request.vace.check(request.num_frames, request.height, request.width)
    return attrs.evolve(geometry, frames=geometry.frames + len(request.vace.references))


def request_control(request: GenerationRequest, autoencoder: VideoAutoencoder, vae: VaeSpec) -> np.ndarray:
    """The control latents of a request to a VACE model (none given: diffusers' defaults, a
    mid-grey video to regenerate everywhere)."""
    video, mask, references = (None, None, []) if request.vace is None else request.vace.as_unit()
    return vace_control(
        autoencoder, video, mask, references, frames=request.num_frames, height=request.height,
        width=request.width, temporal=vae.temporal_compression, spatial=vae.spatial_compression,
    )  # fmt: skip


def reference_frames(request: GenerationRequest) -> int:
    """The latent frames a VACE request's reference images add before the video's (dropped before decoding)."""
    return 0 if request.vace is None else len(request.vace.references)


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
