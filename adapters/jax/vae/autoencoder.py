"""The JAX video autoencoder: latents -> uint8 frames on device, then one transfer to the host;
input images or a source video -> normalized latents for conditioning or video-to-video."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from wanjax.adapters.jax.platform.compiled import CompiledFunction, xla_options
from wanjax.adapters.jax.platform.residency import RESIDENT, Residency
from wanjax.adapters.jax.vae.model import WanVAE, to_uint8
from wanjax.adapters.jax.vae.sharding import SpatialSharding
from wanjax.adapters.media.images import fit_image
from wanjax.domain.errors import NumericalError


class JaxVideoAutoencoder:
    """Implements the VideoAutoencoder port on the Wan VAE.

    With `spatial` the decode runs over its mesh: parameters replicated on every device,
    activations split along height (or width), the uint8 frames replicated at the end so
    that every process can read them. Encoding (the input images, a source video) and tiled
    decoding run replicated. With a `residency` off the device (`offload=components`) its
    weights wait in host memory and are on the device only while it encodes or decodes.
    """

    def __init__(self, vae: WanVAE, spatial: SpatialSharding | None = None, residency: Residency = RESIDENT) -> None:
        self._graphdef, self._params = nnx.split(vae)
        self._spatial = spatial
        self._residency = residency
        if spatial is not None:
            self._params = jax.device_put(self._params, spatial.replicated)
        self._params = residency.at_rest(self._params)
        options = xla_options()
        self._decode = CompiledFunction(self._decode_to_uint8, compiler_options=options)
        self._encode = CompiledFunction(self._encode_normalized, compiler_options=options)
        self._decode_unit = CompiledFunction(self._decode_to_unit, compiler_options=options)

    def _decode_to_uint8(self, params: nnx.State, latents: jax.Array) -> tuple[jax.Array, jax.Array]:
        """The frames, and whether every decoded value was finite (NaN would become some uint8)."""
        vae = nnx.merge(self._graphdef, params)
        if self._spatial is None:
            unit = vae.decode_to_unit(latents)
            return to_uint8(unit), jnp.isfinite(unit).all()
        if vae.runtime.tiling is not None:
            # Tiles cut from split latents came out wrong (0.09 off in [0, 1]) on XLA:CPU, so a tiled
            # decode, whose tiles already bound its memory, runs replicated on every device.
            replicated = jax.lax.with_sharding_constraint(latents, self._spatial.replicated)
            unit = vae.decode_to_unit(replicated)
            frames = jax.lax.with_sharding_constraint(to_uint8(unit), self._spatial.replicated)
            return frames, jnp.isfinite(unit).all()
        constrain = self._spatial.constrainer(latents.shape)
        # Pinned split, then replicated: the gather moves uint8 frames, a quarter of float32's bytes.
        unit = vae.decode_to_unit(constrain(latents), constrain)
        frames = constrain(to_uint8(unit))  # [B, F, H, W, 3]
        return jax.lax.with_sharding_constraint(frames, self._spatial.replicated), jnp.isfinite(unit).all()

    def _decode_to_unit(self, params: nnx.State, latents: jax.Array) -> jax.Array:
        """Frames in [0, 1] float32, replicated (decoded as `decode_to_uint8` does, before rounding)."""
        vae = nnx.merge(self._graphdef, params)
        if self._spatial is None:
            return vae.decode_to_unit(latents).astype(jnp.float32)
        replicated = jax.lax.with_sharding_constraint(latents, self._spatial.replicated)
        return vae.decode_to_unit(replicated).astype(jnp.float32)

    def _encode_normalized(self, params: nnx.State, video: jax.Array) -> jax.Array:
        vae = nnx.merge(self._graphdef, params)
        return vae.normalize_latents(vae.encode(video))

    def encode_image(
        self, pixels: np.ndarray, height: int, width: int, num_frames: int, last_pixels: np.ndarray | None = None
    ) -> jax.Array:
        video = np.zeros((1, num_frames, height, width, 3), np.float32)  # [B, F, H, W, 3] in [-1, 1]
        video[0, 0] = fit_image(pixels, height, width)
        if last_pixels is not None:
            video[0, -1] = fit_image(last_pixels, height, width)
        return self.encode_video(video)

    def encode_frames(self, frames: np.ndarray, height: int, width: int) -> jax.Array:
        return self.encode_video(np.stack([fit_image(frame, height, width) for frame in frames])[None])

    def encode_video(self, video: np.ndarray) -> jax.Array:
        if self._spatial is not None:
            video = jax.device_put(video, self._spatial.replicated)
        return self._encode(self._residency.working(self._params), video)

    def prepare(self, latents: Any) -> jax.stages.Compiled:
        """Compiles the decode of `latents`' shape; returns the executable (its HLO shows the collectives)."""
        return self._decode.prepare(self._residency.working_shapes(self._params), latents)

    def decode_to_unit(self, latents: Any) -> jax.Array:
        unit = self._decode_unit(self._residency.working(self._params), latents)
        if not bool(jnp.isfinite(unit).all()):
            raise NumericalError(
                "the VAE decoded NaN or infinite values; try --set vae_dtype=float32, or re-download the checkpoint"
            )
        return unit

    def decode_to_uint8(self, latents: Any) -> np.ndarray:
        frames, finite = self._decode(self._residency.working(self._params), latents)
        if not bool(finite):
            raise NumericalError(
                "the VAE decoded NaN or infinite values, so no video was written. Likely causes: its weights "
                "hold NaN/inf (re-download the checkpoint), or it overflowed in bfloat16 (try --set vae_dtype=float32)"
            )
        return np.asarray(frames)
