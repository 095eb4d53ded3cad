"""Diffusers-format weights <-> `WanTransformer` parameters.

One table (`weight_names`, plus each of the model's extensions' `weights`: VACE's, Animate's,
the I2V image embedder's) maps each diffusers tensor name to a parameter path and a layout
change; loading and exporting both walk it, so the two directions cannot drift apart.

Dtypes follow the model's parameters: `runtime.param_dtype` everywhere except what
diffusers keeps in fp32 (`_keep_in_fp32_modules`, matched per dotted name component),
which stays fp32 here too: both `scale_shift_table`s, `blocks.N.norm2.*`,
`condition_embedder.time_embedder.*` and the I2V image embedder's `norm1.*`/`norm2.*`.
(The q/k RMS norm weights and the FLF2V `pos_embed` are not in that list and use
`param_dtype`, as in diffusers.) `storage_layout` may store the matmul kernels of the layer
stacks (the blocks', an extension's `rules.stacks`) in fp8 instead.

Loading reads each tensor once, zero-copy from the file mapping, and casts it straight
into its slot of a preallocated (for scanned blocks, stacked [L, ...]) buffer, on a few
threads, in file order (`host_buffers`); the buffers then go to the device(s)
(`staging`). Original-format (Wan repo / ComfyUI) names arrive already renamed to
diffusers names (`checkpoints.original_names`). A GGUF or scaled fp8 file's quantized block
kernels stay as stored (`packed_weights`).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.typing import DTypeLike

from wanjax.adapters.checkpoints.weights import TensorFiles
from wanjax.adapters.jax.loading.host_buffers import CopyJob, aligned_empty, run_jobs
from wanjax.adapters.jax.loading.staging import ReplicatedPlacement
from wanjax.adapters.jax.platform.packed_kernel import PackedKernel
from wanjax.adapters.jax.platform.scaled_kernel import ScaledKernel
from wanjax.adapters.jax.transformer.model import WanTransformer
from wanjax.adapters.jax.transformer.extensions import transformer_extensions
from wanjax.adapters.jax.transformer.packed_weights import STORED_KERNELS, packed_layout, stored_reads
from wanjax.adapters.jax.transformer.runtime import TransformerRuntime
from wanjax.adapters.jax.transformer.weight_names import (
    Path,
    Slot,
    block_entries,
    stack_slots,
    top_entries,
)
from wanjax.domain.errors import CheckpointError
from wanjax.domain.specs import TransformerSpec

def parameter_slots(model: WanTransformer) -> list[Slot]:
    """Where each diffusers tensor goes in `model`: its parameter, layer and layout change."""
    spec = model.spec
    slots = [Slot(e.name, e.path, None, e.to_jax) for e in top_entries()]
    slots += stack_slots("blocks", ("blocks",), block_entries(spec), spec.num_layers, scan_layers=model.scan_layers)
    for extension in transformer_extensions(spec):
        slots += extension.weights(spec, model.scan_layers)
    return slots


def _params(model: WanTransformer, slots: Sequence[Slot]) -> dict[Path, nnx.Param]:
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
    shown = "; ".join(names[:limit])
    return shown + (f", ... ({len(names) - limit} more)" if len(names) > limit else "")


def _where(tensors: Mapping[str, np.ndarray], name: str) -> str:
    return tensors.locate(name) if isinstance(tensors, TensorFiles) else repr(name)


def _check_names(slots: Sequence[Slot], tensors: Mapping[str, np.ndarray]) -> None:
    expected = {slot.name for slot in slots}
    missing = [slot.name for slot in slots if slot.name not in tensors]
    unexpected = sorted(set(tensors) - expected)
    problems = [
        f"{kind} {len(names)} tensor(s): {_listing([_where(tensors, name) for name in names])}"
        for kind, names in (("missing", missing), ("unexpected", unexpected))
        if names
    ]
    if problems:
        raise CheckpointError(
            "transformer weights do not match its config.json ("
            + "; ".join(problems)
            + "); check that the weights and config come from the same Wan checkpoint"
        )


def abstract_transformer(spec: TransformerSpec, runtime: TransformerRuntime) -> WanTransformer:
    """The model with shapes and dtypes but no values (no random init): a target to fill."""
    return nnx.eval_shape(lambda: WanTransformer(spec, runtime, rngs=nnx.Rngs(0)))


def storage_layout(
    model: WanTransformer,
    kernel_dtype: DTypeLike | None = None,
    tensors: Mapping[str, np.ndarray] | None = None,
) -> dict[Path, jax.ShapeDtypeStruct | PackedKernel | ScaledKernel]:
    """Each parameter's final shape and storage dtype.

    The model's own dtypes (`runtime.param_dtype`, fp32 where diffusers keeps fp32), except
    that `kernel_dtype` (fp8) stores the matmul kernels of the layer stacks (`parameter_rules.stacks`:
    the blocks, and VACE's, nearly all the bytes; Animate's face adapters, 0.84B parameters at
    Animate-14B), and that the kernels of those stacks that `tensors` holds quantized (a GGUF file's
    blocks, a scaled fp8 file's values and scales) stay so (`packed_weights`); the layers cast or
    dequantize them to the compute dtype as they use them. Embedders (Animate's pose patch
    embedding too), the output projection, biases, norms and Animate's face-video encoders (41M
    parameters, run once per segment: fp8 would save 40 MB and cost accuracy in what every face
    adapter reads) keep the model's dtype.
    """
    layout, own = {}, {}
    stacks = model.parameter_rules.stacks
    slots = parameter_slots(model)
    for path, param in _params(model, slots).items():
        abstract = own[path] = param.get_value()
        dtype = abstract.dtype
        stacked = any(name in path for name in stacks)
        if kernel_dtype is not None and stacked and path[-1] == "kernel" and dtype != jnp.float32:
            dtype = jnp.dtype(kernel_dtype)
        layout[path] = jax.ShapeDtypeStruct(abstract.shape, dtype)
    return layout | packed_layout(slots, own, tensors, stacks)


def convert_transformer_weights(
    model: WanTransformer,
    tensors: Mapping[str, np.ndarray],
    *,
    kernel_dtype: DTypeLike | None = None,
    workers: int | None = None,
) -> dict[Path, np.ndarray]:
    """Diffusers-named tensors in torch layout -> host arrays in the model's layout and
    storage dtypes (`storage_layout`), each written once into a preallocated buffer.

    Names, and for files the shapes too (from the headers), are all checked before any
    tensor is read; a problem raises `CheckpointError` naming the tensor and, for files,
    the file. Other mappings (a LoRA merge computes its tensors) are read once, their
    shapes checked as they are.
    """
    slots = parameter_slots(model)
    _check_names(slots, tensors)
    layout = storage_layout(model, kernel_dtype, tensors)
    buffers = jax.tree.map(lambda a: aligned_empty(a.shape, a.dtype), layout)
    files = isinstance(tensors, TensorFiles)
    if files:
        slots = sorted(slots, key=lambda slot: tensors.byte_offset(slot.name))
    jobs = []
    for slot in slots:
        buffer = buffers[slot.path]
        if isinstance(buffer, STORED_KERNELS):  # as the file stores them (`packed_weights`)
            reads = stored_reads(tensors, slot, buffer)
        else:
            target = buffer if slot.layer is None else buffer[slot.layer]
            read = functools.partial(_read_checked, tensors, slot.name, _torch_shape(target.shape, slot.to_jax))
            reads = [(read, target, slot.to_jax)]
        for read, target, to_jax in reads:
            if files:
                read()  # a view: checks the shape from the header, reads nothing
            release = functools.partial(tensors.release, slot.name) if files else None
            jobs.append(CopyJob(read, target, to_jax, release))
    run_jobs(jobs, workers)
    return buffers


def _read_checked(tensors: Mapping[str, np.ndarray], name: str, expected: tuple[int, ...]) -> np.ndarray:
    tensor = tensors[name]
    if tuple(tensor.shape) != expected:
        raise CheckpointError(
            f"{_where(tensors, name)}: tensor has shape {tuple(tensor.shape)}, expected {expected} from the config"
        )
    return tensor


def set_parameters(model: WanTransformer, arrays: Mapping[Path, jax.Array]) -> WanTransformer:
    """Fills the model's parameters (all of them) with `arrays`, keyed by parameter path."""
    params = _params(model, parameter_slots(model))
    if set(arrays) != set(params):
        raise RuntimeError(f"parameters and arrays disagree: {sorted(map(str, set(arrays) ^ set(params)))[:8]}")
    for path, array in arrays.items():
        params[path].set_value(array)
    return model


def load_transformer(
    spec: TransformerSpec,
    runtime: TransformerRuntime,
    tensors: Mapping[str, np.ndarray],
    *,
    kernel_dtype: DTypeLike | None = None,
    placement: ReplicatedPlacement | None = None,
    workers: int | None = None,
) -> WanTransformer:
    """Builds a `WanTransformer` from diffusers-named tensors in torch layout.

    The model is traced abstractly (no random init); each parameter is assembled once
    on the host in its final dtype and layout (block tensors written into one stacked
    buffer when `runtime.scan_layers`), then placed on the device(s) by `placement`
    (default: the default device; on CPU the aligned buffers become device arrays
    without a copy). Raises `CheckpointError` on missing or unexpected names and on
    shape mismatches.
    """
    model = abstract_transformer(spec, runtime)
    host = convert_transformer_weights(model, tensors, kernel_dtype=kernel_dtype, workers=workers)
    return set_parameters(model, (placement or ReplicatedPlacement()).put_all(host))


def transformer_weight_shapes(model: WanTransformer) -> dict[str, tuple[int, ...]]:
    """Diffusers tensor names and torch-layout shapes the model expects; works on an
    abstract (`nnx.eval_shape`) model, so a checkpoint can be checked before loading."""
    slots = parameter_slots(model)
    params = _params(model, slots)
    shapes = {}
    for slot in slots:
        shape = params[slot.path].get_value().shape
        shapes[slot.name] = _torch_shape(shape if slot.layer is None else shape[1:], slot.to_jax)
    return shapes


def export_transformer_weights(model: WanTransformer) -> dict[str, np.ndarray]:
    """The inverse of `load_transformer`: diffusers names, torch layouts, the model's dtypes."""
    slots = parameter_slots(model)
    host = {path: np.asarray(param[...]) for path, param in _params(model, slots).items()}
    weights = {}
    for slot in slots:
        value = host[slot.path] if slot.layer is None else host[slot.path][slot.layer]
        if slot.to_jax is not None:
            value = value.transpose(np.argsort(slot.to_jax))
        weights[slot.name] = np.ascontiguousarray(value)
    return weights
