"""Conditioning: how a Wan model takes its input image, and the arrays the denoiser receives
(each mode of domain/modes/ fills its own), each declaring how it splits across the guidance rows
(`GUIDANCE_ROWS`, domain/guidance.py)."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any, NamedTuple

from wanjax.domain.guidance import SHARED, UNBATCHED, RowSplit, blank_when_unconditional


class ImageConditioning(enum.Enum):
    """What a checkpoint does with an input image."""

    NONE = "none"  # text-to-video: Wan 2.1 T2V, Wan 2.2 T2V A14B
    CHANNELS = "channels"  # mask + first-frame latents as extra input channels: Wan 2.1 I2V, 2.2 I2V A14B
    FIRST_FRAME = "first_frame"  # first latent frame replaced, its tokens at timestep 0: Wan 2.2 TI2V-5B


class Conditioning(NamedTuple):
    """Per-generation conditioning (a pytree: absent parts are None).

    extra_channels: [B, F', H', W', Cx] appended to the latents' channels at every step.
    image_context: [B, N, D] image-encoder tokens for the transformer's image cross-attention.
    first_frame: [B, 1, H', W', C] latents that replace latent frame 0 at every step and at the end.
    control: [B, Fc' <= F', H', W', Cv] VACE control latents (Wan 2.1 VACE: video, mask and
      reference images encoded, Cv = 96), read by the VACE blocks at every step.
    control_scale: [] or [V] (one per VACE layer): the hints' conditioning scale (None: 1).
    pose: [B, F' - 1, H', W', C] Wan Animate's pose latents (one segment's), for every latent frame
      after the reference frame, read by the pose patch embedding at every step.
    face: [B, T, S, S, 3] Wan Animate's face video (the segment's T pixel frames) in [-1, 1], read by
      the motion encoder.

    A new field declares its `RowSplit` in `GUIDANCE_ROWS` (the guider refuses one that does not).
    """

    extra_channels: Any = None
    image_context: Any = None
    first_frame: Any = None
    control: Any = None
    control_scale: Any = None
    pose: Any = None
    face: Any = None


GUIDANCE_ROWS: Mapping[str, RowSplit] = {
    "extra_channels": SHARED,
    "image_context": SHARED,
    "first_frame": SHARED,
    "control": SHARED,
    "control_scale": UNBATCHED,
    "pose": SHARED,
    "face": blank_when_unconditional(-1.0),  # the unconditional rows see a blank face, as diffusers' pass
}
"""How each `Conditioning` field splits across the guidance rows, by field name."""
