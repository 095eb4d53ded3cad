"""A request's LoRAs on a quantized kernel (GGUF blocks, scaled fp8): added after dequantization, per
layer inside the step, so the kernel stays quantized on the device.

A merged copy of a quantized kernel would be a dequantized one, as big as the bf16 model's.
`LoraKernel` instead keeps the quantized kernel and the LoRAs' factors beside it: `kernel[...]`, how
the layer reads it, is the kernel dequantized in float32 plus sum scale * factor * up @ down, cast to
the kernel's dtype, which is the load-time merge's arithmetic on the dequantized weights (the scales
folded into the up factors, so the sums round apart). A stacked kernel carries factors for every
layer, zero where no LoRA changes it, so the scan slices them with the kernel. The step compiles
once per LoRA rank (the factors' shapes); scales and weights are arguments.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from wanjax.adapters.jax.lora.factors import DeviceDelta
from wanjax.adapters.jax.platform.packed_kernel import PackedKernel
from wanjax.adapters.jax.platform.scaled_kernel import ScaledKernel
from wanjax.adapters.jax.transformer.weight_names import Slot
from wanjax.domain.errors import CheckpointError

Terms = tuple[tuple[DeviceDelta, np.float32], ...]  # each delta with its LoRA's scale, in order


@jax.tree_util.register_pytree_node_class
class LoraKernel:
    """A quantized `base` kernel [..., in, out] plus down [..., R, in] and up [..., out, R] (float32,
    the scales folded in), read as their sum (see the module)."""

    def __init__(self, base: PackedKernel | ScaledKernel, down: Any, up: Any) -> None:
        self.base = base
        self.down = down
        self.up = up

    def tree_flatten(self) -> tuple[tuple[Any, Any, Any], None]:
        return (self.base, self.down, self.up), None

    @classmethod
    def tree_unflatten(cls, _: None, children: tuple[Any, Any, Any]) -> LoraKernel:
        return cls(*children)

    @property
    def shape(self) -> tuple[int, ...]:
        return self.base.shape

    @property
    def ndim(self) -> int:
        return self.base.ndim

    @property
    def dtype(self) -> jnp.dtype:
        return self.base.dtype

    def __getitem__(self, index: Any) -> jax.Array:
        """`kernel[...]`: the dequantized kernel plus the LoRAs' delta, [..., in, out] in `dtype`."""
        if index is not Ellipsis:
            raise TypeError("a LoraKernel is read whole (kernel[...]); slice the array it reads as")
        delta = jnp.einsum("...ri,...or->...io", self.down, self.up)
        return (self.base.read_as(jnp.float32) + delta).astype(self.base.dtype)


def lora_kernel(base: PackedKernel | ScaledKernel, targets: Sequence[tuple[Slot, Terms]]) -> LoraKernel:
    """`base` with each target tensor's deltas as factors: the whole kernel's, or per layer of a stacked
    one (zero factors for the layers no LoRA changes); a CheckpointError for a full (diff) delta."""
    rank = max(sum(int(delta.up.shape[1]) for delta, _ in terms) for _, terms in targets)
    *lead, inputs, outputs = base.shape
    down, up = jnp.zeros((*lead, rank, inputs), jnp.float32), jnp.zeros((*lead, outputs, rank), jnp.float32)
    for slot, terms in targets:
        if any(delta.down is None for delta, _ in terms):
            raise CheckpointError(
                f"a LoRA changes {slot.name} by a full (diff) delta; a quantized kernel takes low-rank deltas "
                "only: use the transformer's bf16 release for this LoRA"
            )
        where = () if slot.layer is None else (slot.layer,)
        ups = jnp.concatenate([scale * delta.factor * delta.up for delta, scale in terms], axis=1)  # [out, r]
        downs = jnp.concatenate([delta.down for delta, _ in terms], axis=0)  # [r, in]
        down = down.at[(*where, slice(0, downs.shape[0]))].set(downs)
        up = up.at[(*where, slice(None), slice(0, ups.shape[1]))].set(ups)
    return LoraKernel(base, down, up)
