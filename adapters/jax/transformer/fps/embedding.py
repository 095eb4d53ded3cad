"""SkyReels-V2's fps embedding: a two-row table (16 fps, other) whose row, through a SiLU MLP,
is added to every block's modulation (diffusers' `fps_embedding` and `fps_projection`; the head's
time embedding is left as it is)."""

from __future__ import annotations

from collections.abc import Mapping

import jax
import numpy as np
from flax import nnx

from wanjax.adapters.jax.transformer.extension import NoExtensionHooks
from wanjax.adapters.jax.transformer.runtime import TransformerRuntime
from wanjax.domain.extensions.fps import FPS_ROWS
from wanjax.domain.specs import TransformerSpec


class FpsEmbedding(NoExtensionHooks, nnx.Module):
    def __init__(self, spec: TransformerSpec, runtime: TransformerRuntime, *, rngs: nnx.Rngs):
        d = spec.inner_dim
        self.table = nnx.Param(jax.random.normal(rngs.params(), (FPS_ROWS, d), runtime.param_dtype))
        linear = dict(dtype=runtime.dtype, param_dtype=runtime.param_dtype, rngs=rngs)
        self.proj_in = nnx.Linear(d, d, **linear)
        self.proj_out = nnx.Linear(d, 6 * d, **linear)
        self.dtype = runtime.dtype
        self.num_layers = spec.num_layers

    def layer_slots(self) -> np.ndarray:
        return np.full(self.num_layers, -1, np.int32)  # nothing after any block

    def prepare(self, inputs: Mapping[str, jax.Array], latent_shape: tuple[int, ...]) -> jax.Array:
        row = inputs.get("row")
        if row is None or tuple(row.shape) != (latent_shape[0], FPS_ROWS):
            got = None if row is None else tuple(row.shape)
            batch = latent_shape[0]
            raise ValueError(f"this transformer's fps embedding needs its row, one-hot [B={batch}, 2]; got {got}")
        return row

    def modulation(self, temb6: jax.Array, prepared: jax.Array) -> jax.Array:
        """temb6 [B, T, 6, D] plus the projected embedding of each row's frame rate."""
        embedded = (prepared.astype(self.dtype) @ self.table[...].astype(self.dtype))  # [B, D]
        projected = self.proj_out(jax.nn.silu(self.proj_in(embedded)))  # [B, 6 D]
        return temb6 + projected.reshape(projected.shape[0], 1, 6, -1).astype(temb6.dtype)
