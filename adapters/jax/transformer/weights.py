"""Diffusers-format weights <-> `WanTransformer` parameters.

One table (`_top_entries`, `_block_entries`) maps each diffusers tensor name to a
parameter path and a layout change; loading and exporting both walk it, so the two
directions cannot drift apart.

Dtypes follow the model's parameters: `runtime.param_dtype` everywhere except what
diffusers keeps in fp32 (`_keep_in_fp32_modules`, matched per dotted name component),
which stays fp32 here too: both `scale_shift_table`s, `blocks.N.norm2.*`,
`condition_embedder.time_embedder.*` and the I2V image embedder's `norm1.*`/`norm2.*`.
(The q/k RMS norm weights and the FLF2V `pos_embed` are not in that list and use
`param_dtype`, as in diffusers.)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import jax.numpy as jnp
import numpy as np
from flax import nnx

from wanjax.adapters.jax.transformer.model import WanTransformer
from wanjax.adapters.jax.transformer.runtime import TransformerRuntime
from wanjax.domain.errors import CheckpointError
from wanjax.domain.specs import TransformerSpec

Path = tuple[str | int, ...]

LINEAR = (1, 0)  # torch Linear [out, in] -> [in, out]
CONV3D = (2, 3, 4, 1, 0)  # torch Conv3d [D, C, pt, ph, pw] -> [pt, ph, pw, C, D]


@dataclasses.dataclass(frozen=True)
class _Entry:
    """A diffusers tensor name, our parameter path, and the torch -> JAX axis permutation
    (None: same layout). Block entries are relative to `blocks.{i}.` / the block."""

    name: str
    path: Path
    to_jax: tuple[int, ...] | None = None


@dataclasses.dataclass(frozen=True)
class _Slot:
    """One diffusers tensor placed in the model: `layer` indexes the stacked leading
    axis of a scanned block parameter (None when the parameter holds one tensor)."""

    name: str
    path: Path
    layer: int | None
    to_jax: tuple[int, ...] | None


def _linear(name: str, path: Path) -> tuple[_Entry, _Entry]:
    return _Entry(f"{name}.weight", (*path, "kernel"), LINEAR), _Entry(f"{name}.bias", (*path, "bias"))


def _layer_norm(name: str, path: Path) -> tuple[_Entry, _Entry]:
    return _Entry(f"{name}.weight", (*path, "scale")), _Entry(f"{name}.bias", (*path, "bias"))


def _top_entries(spec: TransformerSpec) -> tuple[_Entry, ...]:
    cond = "condition_embedder"
    return (
        _Entry("patch_embedding.weight", ("patch_embedding", "kernel"), CONV3D),
        _Entry("patch_embedding.bias", ("patch_embedding", "bias")),
        *_linear(f"{cond}.time_embedder.linear_1", (cond, "time_embedder", "linear_1")),
        *_linear(f"{cond}.time_embedder.linear_2", (cond, "time_embedder", "linear_2")),
        *_linear(f"{cond}.time_proj", (cond, "time_proj")),
        *_linear(f"{cond}.text_embedder.linear_1", (cond, "text_embedder", "linear_1")),
        *_linear(f"{cond}.text_embedder.linear_2", (cond, "text_embedder", "linear_2")),
        *_linear("proj_out", ("proj_out",)),
        _Entry("scale_shift_table", ("scale_shift_table",)),
        *(_image_embedder_entries(spec) if spec.uses_image_embeddings else ()),
    )


def _image_embedder_entries(spec: TransformerSpec) -> tuple[_Entry, ...]:
    name, path = "condition_embedder.image_embedder", ("condition_embedder", "image_embedder")
    entries = [
        *_layer_norm(f"{name}.norm1", (*path, "norm1")),
        *_linear(f"{name}.ff.net.0.proj", (*path, "ff", "proj_in")),
        *_linear(f"{name}.ff.net.2", (*path, "ff", "proj_out")),
        *_layer_norm(f"{name}.norm2", (*path, "norm2")),
    ]
    if spec.pos_embed_seq_len is not None:
        entries.append(_Entry(f"{name}.pos_embed", (*path, "pos_embed")))
    return tuple(entries)


def _block_entries(spec: TransformerSpec) -> tuple[_Entry, ...]:
    entries: list[_Entry] = []
    for attn in ("attn1", "attn2"):
        for theirs, ours in (("to_q", "to_q"), ("to_k", "to_k"), ("to_v", "to_v"), ("to_out.0", "to_out")):
            entries += _linear(f"{attn}.{theirs}", (attn, ours))
        entries += [_Entry(f"{attn}.{norm}.weight", (attn, norm, "scale")) for norm in ("norm_q", "norm_k")]
    if spec.uses_image_embeddings:
        entries += _linear("attn2.add_k_proj", ("attn2", "add_k_proj"))
        entries += _linear("attn2.add_v_proj", ("attn2", "add_v_proj"))
        entries.append(_Entry("attn2.norm_added_k.weight", ("attn2", "norm_added_k", "scale")))
    if spec.cross_attn_norm:
        entries += _layer_norm("norm2", ("norm2",))
    entries += _linear("ffn.net.0.proj", ("ffn", "proj_in"))
    entries += _linear("ffn.net.2", ("ffn", "proj_out"))
    entries.append(_Entry("scale_shift_table", ("scale_shift_table",)))
    return tuple(entries)


def _slots(model: WanTransformer) -> list[_Slot]:
    slots = [_Slot(e.name, e.path, None, e.to_jax) for e in _top_entries(model.spec)]
    for i in range(model.spec.num_layers):
        for e in _block_entries(model.spec):
            path, layer = (("blocks", *e.path), i) if model.scan_layers else (("blocks", i, *e.path), None)
            slots.append(_Slot(f"blocks.{i}.{e.name}", path, layer, e.to_jax))
    return slots


def _params(model: WanTransformer, slots: Sequence[_Slot]) -> dict[Path, nnx.Param]:
    params = {tuple(path): node for path, node in nnx.iter_graph(model) if isinstance(node, nnx.Param)}
    unmapped = set(params) ^ {slot.path for slot in slots}
    if unmapped:  # a bug in the table above, not in a checkpoint
        raise RuntimeError(f"weight name table and model parameters disagree: {sorted(map(str, unmapped))}")
    return params


def _torch_shape(jax_shape: tuple[int, ...], to_jax: tuple[int, ...] | None) -> tuple[int, ...]:
    if to_jax is None:
        return tuple(jax_shape)
    return tuple(jax_shape[i] for i in np.argsort(to_jax))


def _listing(names: Sequence[str], limit: int = 8) -> str:
    shown = ", ".join(repr(n) for n in names[:limit])
    return shown + (f", ... ({len(names) - limit} more)" if len(names) > limit else "")


def _check_names(slots: Sequence[_Slot], tensors: Mapping[str, np.ndarray]) -> None:
    expected = {slot.name for slot in slots}
    missing = [slot.name for slot in slots if slot.name not in tensors]
    unexpected = sorted(set(tensors) - expected)
    problems = []
    if missing:
        problems.append(f"missing {len(missing)} tensor(s): {_listing(missing)}")
    if unexpected:
        problems.append(f"unexpected {len(unexpected)} tensor(s): {_listing(unexpected)}")
    if problems:
        raise CheckpointError(
            "transformer weights do not match its config.json ("
            + "; ".join(problems)
            + "); check that the weights and config come from the same Wan checkpoint"
        )


def load_transformer(
    spec: TransformerSpec, runtime: TransformerRuntime, tensors: Mapping[str, np.ndarray]
) -> WanTransformer:
    """Builds a `WanTransformer` from diffusers-named tensors in torch layout.

    The model is traced abstractly (no random init); each parameter is assembled once
    on the host in its final dtype and layout (block tensors written into one stacked
    buffer when `runtime.scan_layers`) and then transferred. Raises `CheckpointError`
    on missing or unexpected names and on shape mismatches.
    """
    model = nnx.eval_shape(lambda: WanTransformer(spec, runtime, rngs=nnx.Rngs(0)))
    slots = _slots(model)
    params = _params(model, slots)
    _check_names(slots, tensors)
    buffers: dict[Path, np.ndarray] = {}
    for slot in slots:
        if slot.path not in buffers:
            abstract = params[slot.path].get_value()
            buffers[slot.path] = np.empty(abstract.shape, abstract.dtype)
        target = buffers[slot.path] if slot.layer is None else buffers[slot.path][slot.layer]
        tensor = np.asarray(tensors[slot.name])
        expected = _torch_shape(target.shape, slot.to_jax)
        if tensor.shape != expected:
            raise CheckpointError(
                f"tensor {slot.name!r} has shape {tensor.shape}, expected {expected} from the config"
            )
        target[...] = (tensor if slot.to_jax is None else tensor.transpose(slot.to_jax)).astype(target.dtype)
    for path, buffer in buffers.items():
        params[path].set_value(jnp.asarray(buffer))
    return model


def transformer_weight_shapes(model: WanTransformer) -> dict[str, tuple[int, ...]]:
    """Diffusers tensor names and torch-layout shapes the model expects; works on an
    abstract (`nnx.eval_shape`) model, so a checkpoint can be checked before loading."""
    slots = _slots(model)
    params = _params(model, slots)
    shapes = {}
    for slot in slots:
        shape = params[slot.path].get_value().shape
        shapes[slot.name] = _torch_shape(shape if slot.layer is None else shape[1:], slot.to_jax)
    return shapes


def export_transformer_weights(model: WanTransformer) -> dict[str, np.ndarray]:
    """The inverse of `load_transformer`: diffusers names, torch layouts, the model's dtypes."""
    slots = _slots(model)
    host = {path: np.asarray(param[...]) for path, param in _params(model, slots).items()}
    weights = {}
    for slot in slots:
        value = host[slot.path] if slot.layer is None else host[slot.path][slot.layer]
        if slot.to_jax is not None:
            value = value.transpose(np.argsort(slot.to_jax))
        weights[slot.name] = np.ascontiguousarray(value)
    return weights
