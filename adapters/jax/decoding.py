"""The JAX video decoder: latents -> uint8 frames on device, then one transfer to the host."""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
from flax import nnx

from wanjax.adapters.jax.compiled import CompiledFunction
from wanjax.adapters.jax.vae.model import WanVAE


class JaxVideoDecoder:
    """Implements the VideoAutoencoder port on the Wan VAE."""

    def __init__(self, vae: WanVAE) -> None:
        self._graphdef, self._params = nnx.split(vae)
        self._decode = CompiledFunction(self._decode_to_uint8)

    def _decode_to_uint8(self, params: nnx.State, latents: jax.Array) -> jax.Array:
        return nnx.merge(self._graphdef, params).decode_to_uint8(latents)

    def prepare(self, latents: Any) -> None:
        self._decode.prepare(self._params, latents)

    def decode_to_uint8(self, latents: Any) -> np.ndarray:
        return np.asarray(self._decode(self._params, latents))
