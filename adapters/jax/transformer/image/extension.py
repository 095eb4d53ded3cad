"""Wan 2.1 I2V's (and FLF2V's) image cross-attention as a transformer extension: the CLIP image
embedder's diffusers names and sharding rules. The embedder itself is part of the condition
embedder (`embeddings.ConditionEmbedder.image`), and the image K/V projections part of every
block's cross-attention (`blocks.Attention`, `image_kv`): their K/V are every block's
`CrossAttentionKV.image_k`/`image_v`, the per-layer slot the blocks scan, so it needs no hooks."""

from __future__ import annotations

from wanjax.adapters.jax.sharding.rules import ParameterRules
from wanjax.adapters.jax.transformer.extension import TransformerExtension
from wanjax.adapters.jax.transformer.weight_names import Entry, Slot, layer_norm_entries, linear_entries
from wanjax.domain.extensions.image import IMAGE_EXTENSION
from wanjax.domain.sharding import EMBED, IMAGE_EMBED, MLP, NORM
from wanjax.domain.specs import TransformerSpec


def image_embedder_slots(spec: TransformerSpec, scan_layers: bool) -> list[Slot]:
    """The image embedder's tensors: two LayerNorms around a GELU MLP, and FLF2V's `pos_embed`."""
    name, path = "condition_embedder.image_embedder", ("condition_embedder", "image_embedder")
    entries = [
        *layer_norm_entries(f"{name}.norm1", (*path, "norm1")),
        *linear_entries(f"{name}.ff.net.0.proj", (*path, "ff", "proj_in")),
        *linear_entries(f"{name}.ff.net.2", (*path, "ff", "proj_out")),
        *layer_norm_entries(f"{name}.norm2", (*path, "norm2")),
    ]
    if spec.pos_embed_seq_len is not None:
        entries.append(Entry(f"{name}.pos_embed", (*path, "pos_embed")))
    return [Slot(e.name, e.path, None, e.to_jax) for e in entries]


IMAGE_TRANSFORMER_EXTENSION = TransformerExtension(
    model=IMAGE_EXTENSION,
    weights=image_embedder_slots,
    rules=ParameterRules(
        table=(
            (("image_embedder", "ff", "proj_in", "kernel"), (IMAGE_EMBED, MLP)),
            (("image_embedder", "ff", "proj_in", "bias"), (MLP,)),
            (("image_embedder", "ff", "proj_out", "kernel"), (MLP, EMBED)),
            (("image_embedder", "pos_embed"), (None, None, NORM)),
        )
    ),
)
