"""Logical axis names of every transformer parameter (by parameter path), and their
resolution through the logical axis rules (domain/sharding.py, data, overridable from config)
to `PartitionSpec`s and `NamedSharding`s on a mesh.

A parameter path is what `nnx.iter_graph` gives, e.g. ("blocks", "attn1", "to_q", "kernel")
for a scanned (stacked [L, D, D]) block kernel or ("blocks", 3, "attn1", "to_q", "kernel")
for block 3 of an unstacked model; the stacked leading axis is named "layers". A VACE
model's VACE blocks are ("vace", "blocks", ...) and follow the same rules.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from flax import nnx
from jax.sharding import AbstractMesh, Mesh, NamedSharding, PartitionSpec

from wanjax.domain.sharding import (
    EMBED,
    HEADS,
    IMAGE_EMBED,
    LAYERS,
    MLP,
    NORM,
    TEXT_EMBED,
    LogicalRules,
)

Path = tuple[str | int, ...]
LogicalAxes = tuple[str | None, ...]

_QKV = ("to_q", "to_k", "to_v", "add_k_proj", "add_v_proj")
_HEAD_NORMS = ("norm_q", "norm_k", "norm_added_k")

# (path suffix, logical axes of the unstacked parameter); the first suffix that matches wins.
# A suffix element is a name or a tuple of names it may be.
_TRANSFORMER_TABLE: tuple[tuple[tuple[str | tuple[str, ...], ...], LogicalAxes], ...] = (
    ((_QKV, "kernel"), (EMBED, HEADS)),
    ((_QKV, "bias"), (HEADS,)),
    (("to_out", "kernel"), (HEADS, EMBED)),
    (("face_adapter", ("norm_q", "norm_k"), "scale"), (None,)),  # Animate: per head dim, shared by heads
    ((_HEAD_NORMS, "scale"), (HEADS,)),
    (("ffn", "proj_in", "kernel"), (EMBED, MLP)),
    (("ffn", "proj_in", "bias"), (MLP,)),
    (("ffn", "proj_out", "kernel"), (MLP, EMBED)),
    (("patch_embedding", "kernel"), (None, None, None, None, EMBED)),  # also the VACE branch's
    (("pose_patch_embedding", "kernel"), (None, None, None, None, EMBED)),  # Animate's pose latents
    (("vace", "proj_in", "kernel"), (EMBED, None)),
    (("time_embedder", "linear_1", "kernel"), (None, EMBED)),
    (("time_embedder", "linear_2", "kernel"), (EMBED, None)),
    (("time_proj", "kernel"), (EMBED, MLP)),
    (("time_proj", "bias"), (MLP,)),
    (("text_embedder", "linear_1", "kernel"), (TEXT_EMBED, MLP)),
    (("text_embedder", "linear_1", "bias"), (MLP,)),
    (("text_embedder", "linear_2", "kernel"), (MLP, EMBED)),
    (("image_embedder", "ff", "proj_in", "kernel"), (IMAGE_EMBED, MLP)),
    (("image_embedder", "ff", "proj_in", "bias"), (MLP,)),
    (("image_embedder", "ff", "proj_out", "kernel"), (MLP, EMBED)),
    (("image_embedder", "pos_embed"), (None, None, NORM)),
    (("proj_out", "kernel"), (EMBED, None)),
    (("proj_out", "bias"), (None,)),
    (("scale_shift_table",), (None, None, NORM)),  # [1, 6, D] in blocks, [1, 2, D] at the head
    (("bias",), (NORM,)),  # biases of projections into the residual stream
    (("scale",), (NORM,)),  # LayerNorm affine parameters
)


def _matches(path: Path, suffix: tuple[str | tuple[str, ...], ...]) -> bool:
    if len(path) < len(suffix):
        return False
    tail = path[len(path) - len(suffix) :]
    return all(part == want or (isinstance(want, tuple) and part in want) for part, want in zip(tail, suffix))


_REPLICATED = ("motion_encoder", "face_encoder")
"""Wan Animate's encoders of the face video: small (23M and 18M parameters at Animate-14B)
and run once per step on a few frames, so every device keeps them whole."""
_STACKS = ("blocks", "face_adapter")
"""Layer stacks: scanned, their parameters gain a leading "layers" axis."""


def transformer_logical_axes(path: Path, ndim: int) -> LogicalAxes:
    """Logical axes of the Wan transformer parameter at `path` (with `ndim` dimensions)."""
    if any(name in path for name in _REPLICATED):
        return (None,) * ndim
    # ("blocks", ...), ("vace", "blocks", ...) or ("animate", "face_adapter", ...): stacked, or indexed by layer
    stack = next((path.index(name) for name in _STACKS if name in path), None)
    stacked = stack is not None and len(path) > stack + 1 and isinstance(path[stack + 1], str)
    for suffix, axes in _TRANSFORMER_TABLE:
        if _matches(path, suffix):
            full = ((LAYERS,) if stacked else ()) + axes
            if len(full) != ndim:  # a bug in the table above, not in a checkpoint
                raise RuntimeError(f"sharding rule {axes} for {path} does not fit its {ndim} dimensions")
            return full
    raise RuntimeError(f"no sharding rule for transformer parameter {'.'.join(map(str, path))}")


def partition_spec(
    logical: Sequence[str | None], shape: Sequence[int], mesh: Mesh | AbstractMesh, rules: LogicalRules
) -> PartitionSpec:
    """Each dimension split over the mesh axes its logical name maps to, keeping only axes of
    size > 1 that no earlier dimension uses, and only as many of them as divide the dimension
    (an indivisible dimension stays replicated over the rest)."""
    mapping = dict(rules)
    used: set[str] = set()
    entries: list[str | tuple[str, ...] | None] = []
    for name, size in zip(logical, shape, strict=True):
        axes = [a for a in mapping.get(name, ()) if a not in used and mesh.shape[a] > 1] if name else []
        while axes and size % math.prod(mesh.shape[a] for a in axes):
            axes.pop()
        used.update(axes)
        entries.append(None if not axes else axes[0] if len(axes) == 1 else tuple(axes))
    while entries and entries[-1] is None:
        entries.pop()
    return PartitionSpec(*entries)


def parameter_shardings(
    model: nnx.Module, mesh: Mesh | AbstractMesh, rules: LogicalRules
) -> dict[Path, NamedSharding]:
    """The NamedSharding of each parameter of a transformer (concrete or abstract), by parameter path."""
    shardings = {}
    for path, node in nnx.iter_graph(model):
        if isinstance(node, nnx.Param):
            shape = node.get_value().shape
            spec = partition_spec(transformer_logical_axes(tuple(path), len(shape)), shape, mesh, rules)
            shardings[tuple(path)] = NamedSharding(mesh, spec)
    return shardings
