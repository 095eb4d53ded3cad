"""GGUF storage of the blocks' matmul kernels: the file's packed blocks, kept packed.

fp8 storage (`weights.storage_layout`'s `kernel_dtype`) stores the kernels of the layer stacks in
fp8; GGUF storage stores the same kernels as the file's quantized blocks (`PackedKernel`), one
block type per parameter: a scanned stack's [L, ...] kernel takes every layer's tensor in one type,
a listed block each its own. Whatever the file holds otherwise (the embedders, the head, norms,
biases, modulation; a quantized tensor a view reads) loads as the model's arrays, dequantized on
the host where the file quantized it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from wanjax.adapters.checkpoints.gguf_file import PackedTensors
from wanjax.adapters.jax.platform.packed_kernel import PackedKernel, packed_shape
from wanjax.adapters.jax.transformer.weight_names import Path, Slot
from wanjax.domain.errors import CheckpointError


def packed_layout(
    slots: Sequence[Slot],
    own: Mapping[Path, jax.ShapeDtypeStruct],
    tensors: Mapping[str, np.ndarray] | None,
    stacks: Iterable[str],
) -> dict[Path, PackedKernel]:
    """The kernels of the layer `stacks` that `tensors` holds as GGUF blocks, each a `PackedKernel`
    of `jax.ShapeDtypeStruct` blocks dequantizing to the parameter's own dtype (`own`)."""
    if not isinstance(tensors, PackedTensors):
        return {}
    stacks = tuple(stacks)
    types: dict[Path, dict[str, str | None]] = defaultdict(dict)
    for slot in slots:
        if slot.path[-1] == "kernel" and any(name in slot.path for name in stacks):
            types[slot.path][slot.name] = tensors.block_type(slot.name)
    layout = {}
    for path, named in types.items():
        kinds = set(named.values())
        if kinds == {None}:
            continue
        if len(kinds) > 1:
            shown = ", ".join(f"{name}: {kind or 'float'}" for name, kind in list(named.items())[:4])
            raise CheckpointError(
                f"the layers' {'.'.join(map(str, path))} tensors are stored in different GGUF types ({shown}, ...); "
                "scanned layers keep one type per tensor: --set scan_layers=false keeps each layer's own"
            )
        kind = kinds.pop()
        abstract = own[path]
        layout[path] = PackedKernel(jax.ShapeDtypeStruct(packed_shape(abstract.shape, kind), jnp.uint8), kind, abstract.dtype)
    return layout


def has_packed(layout: Mapping[Path, object]) -> bool:
    """Whether any parameter of `layout` is stored packed."""
    return any(isinstance(value, PackedKernel) for value in layout.values())


def packed_read(
    tensors: PackedTensors, name: str, blocks: np.ndarray, layer: int | None
) -> tuple[Callable[[], np.ndarray], np.ndarray]:
    """(read, destination) of tensor `name`'s blocks into the host buffer `blocks` (row `layer` of a
    stacked one): copied as they are, the file's bytes; the shape checked against the buffer's."""
    target = blocks if layer is None else blocks[layer]

    def read() -> np.ndarray:
        source = tensors.packed(name)
        if source.shape != target.shape:
            raise CheckpointError(
                f"{name}: GGUF blocks of shape {source.shape}, expected {target.shape} from the config"
            )
        return source

    return read, target
