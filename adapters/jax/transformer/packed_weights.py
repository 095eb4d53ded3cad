"""The blocks' matmul kernels as a quantized file stores them, kept so on the device.

fp8 storage (`weights.storage_layout`'s `kernel_dtype`) stores the kernels of the layer stacks in
fp8; a GGUF file's quantized kernels stay its packed blocks (`PackedKernel`), and a ComfyUI scaled
fp8 file's stay its fp8 values with their scales (`ScaledKernel`): one storage per parameter, so a
scanned stack's [L, ...] kernel takes every layer's tensor in one type, a listed block each its own.
Whatever the file holds otherwise (the embedders, the head, norms, biases, modulation; a quantized
tensor a view reads) loads as the model's arrays, dequantized on the host where the file quantized it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from wanjax.adapters.checkpoints.gguf_file import PackedTensors
from wanjax.adapters.jax.platform.packed_kernel import PackedKernel, packed_shape
from wanjax.adapters.jax.platform.scaled_kernel import ScaledKernel
from wanjax.adapters.jax.transformer.weight_names import Path, Slot
from wanjax.domain.errors import CheckpointError
from wanjax.domain.quantization import SCALED_FP8


def packed_layout(
    slots: Sequence[Slot],
    own: Mapping[Path, jax.ShapeDtypeStruct],
    tensors: Mapping[str, np.ndarray] | None,
    stacks: Iterable[str],
) -> dict[Path, PackedKernel | ScaledKernel]:
    """The kernels of the layer `stacks` that `tensors` holds quantized, each a `PackedKernel` (GGUF
    blocks) or `ScaledKernel` (scaled fp8) of `jax.ShapeDtypeStruct`s, read as the parameter's own
    dtype (`own`)."""
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
        layout[path] = _stored(kinds.pop(), own[path])
    return layout


def _stored(kind: str, abstract: jax.ShapeDtypeStruct) -> PackedKernel | ScaledKernel:
    if kind == SCALED_FP8:
        values = jax.ShapeDtypeStruct(abstract.shape, jnp.float8_e4m3fn)
        return ScaledKernel(values, jax.ShapeDtypeStruct(abstract.shape[:-2], jnp.float32), abstract.dtype)
    return PackedKernel(jax.ShapeDtypeStruct(packed_shape(abstract.shape, kind), jnp.uint8), kind, abstract.dtype)


STORED_KERNELS = (PackedKernel, ScaledKernel)


def has_packed(layout: Mapping[Path, object]) -> bool:
    """Whether any parameter of `layout` is stored quantized (`STORED_KERNELS`)."""
    return any(isinstance(value, STORED_KERNELS) for value in layout.values())


Read = tuple[Callable[[], np.ndarray], np.ndarray, tuple[int, ...] | None]
"""(read, destination, torch -> JAX axes) of one host copy."""


def stored_reads(tensors: PackedTensors, slot: Slot, buffer: PackedKernel | ScaledKernel) -> list[Read]:
    """The copies of tensor `slot.name` into its host `buffer` (row `slot.layer` of a stacked one), as
    stored: a GGUF tensor's blocks byte for byte; a scaled fp8 tensor's values (transposed to the
    kernel's [in, out]) and its scale. Shapes are checked against the buffer's."""
    row = (lambda a: a) if slot.layer is None else (lambda a: a[slot.layer])
    if isinstance(buffer, PackedKernel):
        blocks = row(buffer.blocks)
        return [(_checked(lambda: tensors.packed(slot.name), slot.name, blocks.shape), blocks, None)]
    values = row(buffer.values)
    scale = buffer.scale if slot.layer is None else buffer.scale[slot.layer : slot.layer + 1]
    torch_shape = tuple(reversed(values.shape))
    return [
        (_checked(lambda: tensors.packed(slot.name), slot.name, torch_shape), values, slot.to_jax),
        (lambda: np.full(scale.shape, tensors.scale(slot.name), np.float32), scale, None),
    ]


def _checked(read: Callable[[], np.ndarray], name: str, expected: tuple[int, ...]) -> Callable[[], np.ndarray]:
    def checked() -> np.ndarray:
        source = read()
        if tuple(source.shape) != tuple(expected):
            raise CheckpointError(
                f"{name}: stored as {tuple(source.shape)}, expected {tuple(expected)} from the config"
            )
        return source

    return checked
