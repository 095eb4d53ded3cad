"""The VACE control latents of a generation: the control video, mask and reference images
encoded by the model's VAE and assembled as domain/vace.py describes."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from wanjax.domain.ports import VideoAutoencoder
from wanjax.domain.vace import control_latents, mask_latents, masked_videos


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
