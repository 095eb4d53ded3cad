"""How the JAX Wan VAE runs (dtypes, matmul precision), kept apart from its architecture."""

from __future__ import annotations

from typing import Any

import attrs
import jax
import jax.numpy as jnp


@attrs.frozen(kw_only=True)
class VaeRuntime:
    """Runtime choices of the VAE; the architecture lives in `VaeSpec`.

    dtype: activations and the dtype convolutions run in.
    param_dtype: how weights are stored (checkpoint tensors are cast to it on load).
    precision: `jax.lax.Precision` of convolutions and attention matmuls. None is the
        backend default, which on recent NVIDIA GPUs means TF32 for float32 inputs
        (torch on CPU is full float32); use HIGHEST for bit-for-bit-minded parity runs.
    """

    dtype: Any = jnp.float32
    param_dtype: Any = jnp.float32
    precision: jax.lax.Precision | None = None
