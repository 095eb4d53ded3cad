"""The name table of a VACE transformer's VACE branch (diffusers' WanVACETransformer3DModel
names -> `VaceBranch` parameters): `vace_patch_embedding`, and `vace_blocks.{k}`, each a
base block's tensors plus `proj_out`; block 0's `proj_in` is the branch's own `proj_in`."""

from __future__ import annotations

from wanjax.adapters.jax.transformer.weight_names import (
    Slot,
    block_entries,
    linear_entries,
    patch_embedding_entries,
    stack_slots,
)
from wanjax.domain.specs import TransformerSpec


def vace_slots(spec: TransformerSpec, scan_layers: bool) -> list[Slot]:
    """The VACE branch's slots."""
    top = (
        *patch_embedding_entries("vace_patch_embedding", ("vace", "patch_embedding")),
        *linear_entries("vace_blocks.0.proj_in", ("vace", "proj_in")),
    )
    blocks = (*block_entries(spec), *linear_entries("proj_out", ("proj_out",)))
    slots = [Slot(e.name, e.path, None, e.to_jax) for e in top]
    return slots + stack_slots(
        "vace_blocks", ("vace", "blocks"), blocks, len(spec.vace_layers), scan_layers=scan_layers
    )
