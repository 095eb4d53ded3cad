"""The JAX video autoencoder: latents -> uint8 frames on device, then one transfer to the host;
an input image -> normalized latents for image-to-video conditioning."""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
from flax import nnx

from wanjax.adapters.jax.compiled import CompiledFunction
from wanjax.adapters.jax.vae.model import WanVAE
from wanjax.adapters.media.images import fit_image


class JaxVideoAutoencoder:
    """Implements the VideoAutoencoder port on the Wan VAE."""

    def __init__(self, vae: WanVAE) -> None:
        self._graphdef, self._params = nnx.split(vae)
        self._decode = CompiledFunction(self._decode_to_uint8)
        self._encode = CompiledFunction(self._encode_normalized)

    def _decode_to_uint8(self, params: nnx.State, latents: jax.Array) -> jax.Array:
        return nnx.merge(self._graphdef, params).decode_to_uint8(latents)

    def _encode_normalized(self, params: nnx.State, video: jax.Array) -> jax.Array:
        vae = nnx.merge(self._graphdef, params)
        return vae.normalize_latents(vae.encode(video))

    def encode_image(self, pixels: np.ndarray, height: int, width: int, num_frames: int) -> jax.Array:
        video = np.zeros((1, num_frames, height, width, 3), np.float32)  # [B, F, H, W, 3] in [-1, 1]
        video[0, 0] = fit_image(pixels, height, width)
        return self._encode(self._params, video)

    def prepare(self, latents: Any) -> None:
        self._decode.prepare(self._params, latents)

    def decode_to_uint8(self, latents: Any) -> np.ndarray:
        return np.asarray(self._decode(self._params, latents))
