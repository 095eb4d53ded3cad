"""The name table of the transformer's weights: each diffusers tensor name, the parameter
path it fills and the torch -> JAX layout change (`weights` loads and exports through it; each
transformer extension adds its own, `TransformerExtension.weights`).

A block's entries are relative to the block (`blocks.{i}.` in diffusers, a "layers"
index or list index here); `stack_slots` places them for either block layout.
"""

from __future__ import annotations

import dataclasses

from wanjax.domain.specs import TransformerSpec

Path = tuple[str | int, ...]

LINEAR = (1, 0)  # torch Linear [out, in] -> [in, out]
CONV3D = (2, 3, 4, 1, 0)  # torch Conv3d [D, C, pt, ph, pw] -> [pt, ph, pw, C, D]


@dataclasses.dataclass(frozen=True)
class Entry:
    """A diffusers tensor name, our parameter path, and the torch -> JAX axis permutation
    (None: same layout). Block entries are relative to `blocks.{i}.` / the block."""

    name: str
    path: Path
    to_jax: tuple[int, ...] | None = None


@dataclasses.dataclass(frozen=True)
class Slot:
    """One diffusers tensor placed in the model: `layer` indexes the stacked leading
    axis of a scanned block parameter (None when the parameter holds one tensor)."""

    name: str
    path: Path
    layer: int | None
    to_jax: tuple[int, ...] | None


def linear_entries(name: str, path: Path) -> tuple[Entry, Entry]:
    return Entry(f"{name}.weight", (*path, "kernel"), LINEAR), Entry(f"{name}.bias", (*path, "bias"))


def layer_norm_entries(name: str, path: Path) -> tuple[Entry, Entry]:
    return Entry(f"{name}.weight", (*path, "scale")), Entry(f"{name}.bias", (*path, "bias"))


def patch_embedding_entries(name: str, path: Path) -> tuple[Entry, Entry]:
    return Entry(f"{name}.weight", (*path, "kernel"), CONV3D), Entry(f"{name}.bias", (*path, "bias"))


def top_entries() -> tuple[Entry, ...]:
    cond = "condition_embedder"
    return (
        *patch_embedding_entries("patch_embedding", ("patch_embedding",)),
        *linear_entries(f"{cond}.time_embedder.linear_1", (cond, "time_embedder", "linear_1")),
        *linear_entries(f"{cond}.time_embedder.linear_2", (cond, "time_embedder", "linear_2")),
        *linear_entries(f"{cond}.time_proj", (cond, "time_proj")),
        *linear_entries(f"{cond}.text_embedder.linear_1", (cond, "text_embedder", "linear_1")),
        *linear_entries(f"{cond}.text_embedder.linear_2", (cond, "text_embedder", "linear_2")),
        *linear_entries("proj_out", ("proj_out",)),
        Entry("scale_shift_table", ("scale_shift_table",)),
    )


def block_entries(spec: TransformerSpec) -> tuple[Entry, ...]:
    entries: list[Entry] = []
    for attn in ("attn1", "attn2"):
        for theirs, ours in (("to_q", "to_q"), ("to_k", "to_k"), ("to_v", "to_v"), ("to_out.0", "to_out")):
            entries += linear_entries(f"{attn}.{theirs}", (attn, ours))
        entries += [Entry(f"{attn}.{norm}.weight", (attn, norm, "scale")) for norm in ("norm_q", "norm_k")]
    if spec.uses_image_embeddings:
        entries += linear_entries("attn2.add_k_proj", ("attn2", "add_k_proj"))
        entries += linear_entries("attn2.add_v_proj", ("attn2", "add_v_proj"))
        entries.append(Entry("attn2.norm_added_k.weight", ("attn2", "norm_added_k", "scale")))
    if spec.cross_attn_norm:
        entries += layer_norm_entries("norm2", ("norm2",))
    entries += linear_entries("ffn.net.0.proj", ("ffn", "proj_in"))
    entries += linear_entries("ffn.net.2", ("ffn", "proj_out"))
    entries.append(Entry("scale_shift_table", ("scale_shift_table",)))
    return tuple(entries)


def stack_slots(name: str, path: Path, entries: tuple[Entry, ...], count: int, *, scan_layers: bool) -> list[Slot]:
    """Slots of `count` blocks named `{name}.{i}.` in diffusers, at `path` here: stacked
    (`scan_layers`: layer i of each parameter) or a list (the i-th block's parameter)."""
    slots = []
    for i in range(count):
        for e in entries:
            where, layer = ((*path, *e.path), i) if scan_layers else ((*path, i, *e.path), None)
            slots.append(Slot(f"{name}.{i}.{e.name}", where, layer, e.to_jax))
    return slots
