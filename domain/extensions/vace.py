"""Wan 2.1 VACE's model extension, the domain's half: control latents (and their scale) in, and
the parameter count of its hint blocks."""

from __future__ import annotations

import math

from wanjax.domain.block_parameters import block_parameters, linear
from wanjax.domain.extensions.base import ExtensionCost, ModelExtension
from wanjax.domain.guidance import SHARED, UNBATCHED
from wanjax.domain.specs import TransformerSpec


def _cost(spec: TransformerSpec) -> ExtensionCost:
    """The control patch embedding and proj_in, then the VACE blocks: a base block and proj_out
    each, all of whose hints the base blocks' pass holds."""
    assert spec.vace_layers is not None and spec.vace_in_channels is not None
    d, p, hints = spec.inner_dim, math.prod(spec.patch_size), len(spec.vace_layers)
    block, kernels = block_parameters(spec)
    return ExtensionCost(
        parameters=linear(p * spec.vace_in_channels, d) + linear(d, d) + hints * (block + linear(d, d)),
        kernels=hints * (kernels + d * d),
        extra_blocks=hints,
        held_token_arrays=hints,
        token_kernels=p * spec.vace_in_channels * d + (1 + hints) * d * d,
    )


VACE_EXTENSION = ModelExtension(
    name="vace",
    inputs={
        "control": SHARED,  # [B, Fc' <= F', H', W', Cv] control latents (video, mask and references encoded)
        "scale": UNBATCHED,  # [] or [V]: the hints' conditioning scale (absent: 1)
    },
    present=lambda spec: spec.vace_layers is not None,
    cost=_cost,
    cut=lambda spec, layers: {"vace_layers": tuple(i for i in spec.vace_layers if i < layers)},
    whole_blocks_only=True,
)
