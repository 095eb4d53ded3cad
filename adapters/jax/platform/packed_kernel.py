"""A linear layer's kernel kept as GGUF blocks, dequantized where the layer reads it.

`PackedKernel` stands where a kernel array [..., in, out] would (an `nnx.Param`'s value): its
`blocks` are torch's [..., out, in] rows cut into GGUF blocks, uint8 [..., out, in / block_size,
type_size], exactly the file's bytes. It is a pytree whose one leaf is `blocks`, so it is placed,
sliced by `nnx.scan` (a leading layers axis), streamed by `offload=layers` and moved by
`offload=components` as any weight is, packed. `kernel[...]`, which is how `nnx.Linear` reads its
kernel, returns the dequantized [..., in, out] array in `dtype`: inside a compiled step that is one
layer's dequantization, fused into the computation that uses it, never the whole model's.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from jax.typing import DTypeLike

from wanjax.adapters.jax.platform.gguf_blocks import dequantize
from wanjax.domain.quantization import PACKED_BLOCKS


@jax.tree_util.register_pytree_node_class
class PackedKernel:
    """GGUF `block_type` blocks standing for a kernel [..., in, out] of `dtype` (see the module)."""

    def __init__(self, blocks: Any, block_type: str, dtype: DTypeLike) -> None:
        if block_type not in PACKED_BLOCKS:
            raise ValueError(f"{block_type} is not a packed GGUF block type ({', '.join(PACKED_BLOCKS)})")
        self.blocks = blocks
        self.block_type = block_type
        self.dtype = jnp.dtype(dtype)

    def tree_flatten(self) -> tuple[tuple[Any], tuple[str, jnp.dtype]]:
        return (self.blocks,), (self.block_type, self.dtype)

    @classmethod
    def tree_unflatten(cls, aux: tuple[str, jnp.dtype], children: tuple[Any]) -> PackedKernel:
        return cls(children[0], *aux)

    @property
    def shape(self) -> tuple[int, ...]:
        """The kernel's shape [..., in, out]."""
        *lead, out, count, _ = self.blocks.shape
        return (*lead, count * PACKED_BLOCKS[self.block_type][0], out)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def nbytes(self) -> int:
        """The packed bytes (what device memory holds)."""
        return int(self.blocks.size)

    def __getitem__(self, index: Any) -> jax.Array:
        """`kernel[...]`: the dequantized kernel [..., in, out] in `dtype`."""
        if index is not Ellipsis:
            raise TypeError("a PackedKernel is read whole (kernel[...]); slice the dequantized array")
        return self.read_as(self.dtype)

    def read_as(self, dtype: DTypeLike) -> jax.Array:
        """The dequantized kernel [..., in, out] in `dtype`."""
        return jnp.swapaxes(dequantize(jnp.asarray(self.blocks), self.block_type).astype(dtype), -1, -2)

    def __repr__(self) -> str:
        return f"PackedKernel({self.block_type}, shape={self.shape}, dtype={self.dtype.name})"


def packed_shape(kernel_shape: tuple[int, ...], block_type: str) -> tuple[int, ...]:
    """The blocks' shape [..., out, in / block_size, type_size] of a kernel [..., in, out]."""
    *lead, inputs, out = kernel_shape
    size, type_size = PACKED_BLOCKS[block_type]
    if inputs % size:
        raise ValueError(f"{block_type} packs rows of a multiple of {size} values, not {inputs}")
    return (*lead, out, inputs // size, type_size)
