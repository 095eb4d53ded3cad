"""Logical axis names of every transformer parameter (by parameter path), and their
resolution through the logical axis rules (domain/sharding.py, data, overridable from config)
to `PartitionSpec`s and `NamedSharding`s on a mesh.

A parameter path is what `nnx.iter_graph` gives, e.g. ("blocks", "attn1", "to_q", "kernel")
for a scanned (stacked [L, D, D]) block kernel or ("blocks", 3, "attn1", "to_q", "kernel")
for block 3 of an unstacked model; the stacked leading axis is named "layers". A model
extension (adapters/jax/transformer/extension.py) brings its own `ParameterRules`, matched before
the base ones: its parameters' suffixes, the parts every device keeps whole, its layer stacks.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol

import attrs
from flax import nnx
from jax.sharding import AbstractMesh, Mesh, NamedSharding, PartitionSpec

from wanjax.domain.sharding import (
    EMBED,
    HEADS,
    LAYERS,
    MLP,
    NORM,
    TEXT_EMBED,
    LogicalRules,
)

Path = tuple[str | int, ...]
LogicalAxes = tuple[str | None, ...]
Suffix = tuple[str | tuple[str, ...], ...]

_QKV = ("to_q", "to_k", "to_v", "add_k_proj", "add_v_proj")
_HEAD_NORMS = ("norm_q", "norm_k", "norm_added_k")


@attrs.frozen
class ParameterRules:
    """How parameters shard. table: (path suffix, logical axes of the unstacked parameter); the first
    suffix that matches wins, a suffix element a name or a tuple of names it may be. replicated:
    names of sub-modules every device keeps whole. stacks: names of layer stacks (scanned, their
    parameters gain a leading "layers" axis; fp8 storage stores their matmul kernels)."""

    table: tuple[tuple[Suffix, LogicalAxes], ...] = ()
    replicated: tuple[str, ...] = ()
    stacks: tuple[str, ...] = ()

    def __add__(self, later: ParameterRules) -> ParameterRules:
        """These rules, then `later`'s: this table's suffixes match first."""
        return ParameterRules(self.table + later.table, self.replicated + later.replicated, self.stacks + later.stacks)


class HasParameterRules(Protocol):
    """A model that says how its parameters shard (a `WanTransformer`: the base rules and its extensions')."""

    parameter_rules: ParameterRules


_TRANSFORMER_TABLE: tuple[tuple[Suffix, LogicalAxes], ...] = (
    ((_QKV, "kernel"), (EMBED, HEADS)),
    ((_QKV, "bias"), (HEADS,)),
    (("to_out", "kernel"), (HEADS, EMBED)),
    ((_HEAD_NORMS, "scale"), (HEADS,)),
    (("ffn", "proj_in", "kernel"), (EMBED, MLP)),
    (("ffn", "proj_in", "bias"), (MLP,)),
    (("ffn", "proj_out", "kernel"), (MLP, EMBED)),
    (("patch_embedding", "kernel"), (None, None, None, None, EMBED)),  # also the VACE branch's
    (("time_embedder", "linear_1", "kernel"), (None, EMBED)),
    (("time_embedder", "linear_2", "kernel"), (EMBED, None)),
    (("time_proj", "kernel"), (EMBED, MLP)),
    (("time_proj", "bias"), (MLP,)),
    (("text_embedder", "linear_1", "kernel"), (TEXT_EMBED, MLP)),
    (("text_embedder", "linear_1", "bias"), (MLP,)),
    (("text_embedder", "linear_2", "kernel"), (MLP, EMBED)),
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


TRANSFORMER_RULES = ParameterRules(_TRANSFORMER_TABLE, stacks=("blocks",))
"""The rules of the base transformer (a VACE model's VACE blocks, ("vace", "blocks", ...), follow them too)."""


def transformer_logical_axes(path: Path, ndim: int, rules: ParameterRules = TRANSFORMER_RULES) -> LogicalAxes:
    """Logical axes of the Wan transformer parameter at `path` (with `ndim` dimensions) under `rules`."""
    if any(name in path for name in rules.replicated):
        return (None,) * ndim
    # ("blocks", ...), ("vace", "blocks", ...) or ("animate", "face_adapter", ...): stacked, or indexed by layer
    stack = next((path.index(name) for name in rules.stacks if name in path), None)
    stacked = stack is not None and len(path) > stack + 1 and isinstance(path[stack + 1], str)
    for suffix, axes in rules.table:
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
    model: HasParameterRules, mesh: Mesh | AbstractMesh, rules: LogicalRules
) -> dict[Path, NamedSharding]:
    """The NamedSharding of each parameter of a transformer (concrete or abstract), by parameter path,
    under the model's own `parameter_rules`."""
    shardings = {}
    for path, node in nnx.iter_graph(model):
        if isinstance(node, nnx.Param):
            shape = node.get_value().shape
            logical = transformer_logical_axes(tuple(path), len(shape), model.parameter_rules)
            spec = partition_spec(logical, shape, mesh, rules)
            shardings[tuple(path)] = NamedSharding(mesh, spec)
    return shardings
