"""Dtype names from config -> JAX dtypes."""

from __future__ import annotations

import jax.numpy as jnp

from wanjax.domain.errors import ConfigError

JAX_DTYPES = {"float32": jnp.float32, "bfloat16": jnp.bfloat16, "float8_e4m3fn": jnp.float8_e4m3fn}


def jax_dtype(name: str) -> jnp.dtype:
    if name not in JAX_DTYPES:
        raise ConfigError(f"dtype {name!r} is not supported; use one of {', '.join(JAX_DTYPES)}")
    return jnp.dtype(JAX_DTYPES[name])
