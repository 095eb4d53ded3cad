"""Wan 2.1 I2V's (and FLF2V's) image cross-attention as a model extension, the domain's half:
the CLIP image embedder's parameters. Its inputs are the `Conditioning.image_context` every
image model reads (the KV cache holds their K/V); the blocks' image K/V projections are part of
their cross-attention (`block_parameters`)."""

from __future__ import annotations

from wanjax.domain.block_parameters import linear
from wanjax.domain.extensions.base import ExtensionCost, ModelExtension
from wanjax.domain.specs import TransformerSpec


def _cost(spec: TransformerSpec) -> ExtensionCost:
    """Two LayerNorms around a GELU MLP image_dim -> image_dim -> D, and FLF2V's position embedding."""
    assert spec.image_dim is not None
    m, d = spec.image_dim, spec.inner_dim
    return ExtensionCost(2 * m + linear(m, m) + linear(m, d) + 2 * d + (spec.pos_embed_seq_len or 0) * m)


IMAGE_EXTENSION = ModelExtension(name="image", inputs={}, present=lambda spec: spec.image_dim is not None, cost=_cost)
