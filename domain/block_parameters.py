"""Parameter counts of the Wan transformer's parts, as diffusers counts them: the memory plan's
arithmetic (domain/memory.py) and each model extension's (domain/extensions/)."""

from __future__ import annotations

import math

from wanjax.domain.specs import TransformerSpec


def linear(n_in: int, n_out: int) -> int:
    """A linear layer's parameters: its kernel and bias."""
    return n_in * n_out + n_out


def block_parameters(spec: TransformerSpec) -> tuple[int, int]:
    """(all parameters, those of its matmul kernels) of one transformer block as the spec builds it:
    self- and cross-attention (with a Wan 2.1 I2V model's image K/V projections), the optional
    cross-attention norm, the feed-forward network and the modulation table."""
    d, f = spec.inner_dim, spec.ffn_dim
    image_kv = spec.image_dim is not None
    kernels = (8 + 2 * image_kv) * d * d + 2 * d * f
    block = kernels + (8 + 2 * image_kv) * d + 4 * d + image_kv * d + 2 * d * spec.cross_attn_norm + f + d + 6 * d
    return block, kernels


def base_parameters(spec: TransformerSpec) -> tuple[int, int]:
    """(all parameters, those of the blocks' matmul kernels) of the transformer without its
    extensions: patch, time and text embedders, the blocks and the head."""
    d, p = spec.inner_dim, math.prod(spec.patch_size)
    embed = linear(p * spec.in_channels, d) + linear(spec.freq_dim, d) + linear(d, d) + linear(d, 6 * d)
    embed += linear(spec.text_dim, d) + linear(d, d)
    head = linear(d, p * spec.out_channels) + 2 * d
    block, kernels = block_parameters(spec)
    return embed + spec.num_layers * block + head, spec.num_layers * kernels
