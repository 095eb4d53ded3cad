"""The benchmark's random transformer stores each parameter as a loaded checkpoint would: fp8
weights (`weights_dtype=float8_e4m3fn`) put the blocks' matmul kernels in fp8, as ExpertLoading does."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from flax import nnx

from wanjax.adapters.demo.checkpoint import DEMO_TRANSFORMER
from wanjax.adapters.jax.bench import random_transformer
from wanjax.adapters.jax.transformer.runtime import TransformerRuntime
from wanjax.adapters.jax.transformer.weights import abstract_transformer, storage_layout


def _dtypes(model: nnx.Module) -> dict[tuple, jnp.dtype]:
    return {tuple(path): node.get_value().dtype for path, node in nnx.iter_graph(model) if isinstance(node, nnx.Param)}


def test_fp8_kernels_where_a_checkpoint_would_store_them() -> None:
    runtime = TransformerRuntime(dtype=jnp.bfloat16, param_dtype=jnp.bfloat16)
    model = random_transformer(DEMO_TRANSFORMER, runtime, kernel_dtype=jnp.float8_e4m3fn)

    expected = {path: s.dtype for path, s in storage_layout(abstract_transformer(DEMO_TRANSFORMER, runtime), jnp.float8_e4m3fn).items()}
    assert _dtypes(model) == expected
    fp8 = [path for path, dtype in expected.items() if dtype == jnp.float8_e4m3fn]
    assert fp8 and all("blocks" in path and path[-1] == "kernel" for path in fp8)
    assert any(dtype == jnp.bfloat16 for dtype in expected.values())  # embedders, norms, biases stay


def test_without_fp8_every_parameter_keeps_the_models_dtype_and_is_filled() -> None:
    runtime = TransformerRuntime(dtype=jnp.float32, param_dtype=jnp.float32)
    model = random_transformer(DEMO_TRANSFORMER, runtime)

    assert set(_dtypes(model).values()) == {jnp.dtype(jnp.float32)}
    for path, node in nnx.iter_graph(model):
        if isinstance(node, nnx.Param) and node.get_value().size > 1:
            assert np.asarray(node.get_value()).std() > 0, path
