"""SkyReels-V2's fps embedding as a model extension, the domain's half: its input, which of the two
rows (16 fps, other) the video's frame rate picks, and its parameters."""

from __future__ import annotations

from wanjax.domain.block_parameters import linear
from wanjax.domain.extensions.base import ExtensionCost, ModelExtension
from wanjax.domain.guidance import SHARED
from wanjax.domain.specs import TransformerSpec

FPS_ROWS = 2
"""The embedding's rows: 0 for 16 fps, 1 for any other rate (diffusers' SkyReels-V2 pipelines)."""


def fps_row(fps: int) -> int:
    """The embedding row a video of `fps` frames per second reads."""
    return 0 if fps == 16 else 1


def _cost(spec: TransformerSpec) -> ExtensionCost:
    """The embedding table, then a SiLU MLP D -> D -> 6 D onto the blocks' modulation."""
    d = spec.inner_dim
    return ExtensionCost(FPS_ROWS * d + linear(d, d) + linear(d, 6 * d))


FPS_EXTENSION = ModelExtension(
    name="fps",
    inputs={"row": SHARED},  # [B, 2]: the one-hot row of the video's frame rate (`fps_row`)
    present=lambda spec: spec.inject_sample_info,
    cost=_cost,
)
