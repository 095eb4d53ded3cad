"""A linear layer's kernel kept in fp8 with its scale, as ComfyUI's "scaled fp8" files store it.

`ScaledKernel` stands where a kernel array [..., in, out] would (an `nnx.Param`'s value), as
`PackedKernel` does for GGUF blocks: `values` the file's float8_e4m3fn weights [..., in, out] and
`scale` their per-tensor float32 scales [...] (one per layer of a stack). `kernel[...]`, how `nnx.Linear`
reads a kernel, returns values * scale in `dtype`: the one multiplication the file's own dequantization
does, so a float32 run computes with exactly the dequantized weights.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from jax.typing import DTypeLike


@jax.tree_util.register_pytree_node_class
class ScaledKernel:
    """fp8 `values` [..., in, out] times `scale` [...], read as a kernel of `dtype` (see the module)."""

    def __init__(self, values: Any, scale: Any, dtype: DTypeLike) -> None:
        self.values = values
        self.scale = scale
        self.dtype = jnp.dtype(dtype)

    def tree_flatten(self) -> tuple[tuple[Any, Any], jnp.dtype]:
        return (self.values, self.scale), self.dtype

    @classmethod
    def tree_unflatten(cls, dtype: jnp.dtype, children: tuple[Any, Any]) -> ScaledKernel:
        return cls(*children, dtype)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.values.shape)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def nbytes(self) -> int:
        """The stored bytes: one per value, four per scale."""
        return int(self.values.size) + 4 * int(self.scale.size)

    def __getitem__(self, index: Any) -> jax.Array:
        """`kernel[...]`: the dequantized kernel [..., in, out] in `dtype`."""
        if index is not Ellipsis:
            raise TypeError("a ScaledKernel is read whole (kernel[...]); slice the dequantized array")
        return self.read_as(self.dtype)

    def read_as(self, dtype: DTypeLike) -> jax.Array:
        """The dequantized kernel [..., in, out] in `dtype`."""
        values = jnp.asarray(self.values).astype(jnp.float32)
        return (values * jnp.asarray(self.scale)[..., None, None]).astype(dtype)

    def __repr__(self) -> str:
        return f"ScaledKernel(shape={self.shape}, dtype={self.dtype.name})"
