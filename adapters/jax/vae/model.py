"""The Wan 2.1 VAE (diffusers' AutoencoderKLWan, z_dim 16) in Flax NNX, channels last.

Video is [B, F, H, W, 3] in [-1, 1]; latents are [B, F', H', W', z_dim] with
F' = 1 + (F - 1) / 4 and H' = H / 8, W' = W / 8 for the released checkpoint.
Encoding and decoding run over time in chunks exactly as diffusers does (the first
frame alone, then 4 frames per latent frame), carrying each layer's cache from chunk
to chunk; `encode_chunk` / `decode_chunk` expose one step of those loops.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from wanjax.adapters.jax.vae.blocks import Cache
from wanjax.adapters.jax.vae.decoder import Decoder3d
from wanjax.adapters.jax.vae.encoder import Encoder3d
from wanjax.adapters.jax.vae.layers import CausalConv3d
from wanjax.adapters.jax.vae.runtime import VaeRuntime
from wanjax.domain.specs import VaeSpec


class WanVAE(nnx.Module):
    """Encoder, decoder and the 1x1x1 convs around the latent (`quant_conv`, `post_quant_conv`)."""

    def __init__(self, spec: VaeSpec, runtime: VaeRuntime, *, rngs: nnx.Rngs) -> None:
        self.spec = spec
        self.runtime = runtime
        z = spec.z_dim
        self.encoder = Encoder3d(spec, runtime, rngs=rngs)
        self.quant_conv = CausalConv3d(2 * z, 2 * z, (1, 1, 1), runtime, rngs=rngs)
        self.post_quant_conv = CausalConv3d(z, z, (1, 1, 1), runtime, rngs=rngs)
        self.decoder = Decoder3d(spec, runtime, rngs=rngs)

    def encode_chunk(self, video: jax.Array, cache: Cache = None) -> tuple[jax.Array, Cache]:
        """Video chunk [B, T, H, W, 3] -> (posterior mean [B, T', H', W', z_dim], next cache).

        The first chunk (cache None) is the first frame alone, later chunks are
        `temporal_compression` frames each.
        """
        moments, cache = self.encoder(video, cache)  # [B, T', H', W', 2 z_dim]
        # The posterior's mode is its mean, the first half of the moments' channels.
        return self.quant_conv(moments)[..., : self.spec.z_dim], cache

    def encode(self, video: jax.Array) -> jax.Array:
        """Video [B, F, H, W, 3] in [-1, 1] -> un-normalised latent mean [B, F', H', W', z_dim].

        Matches diffusers' `vae.encode(x).latent_dist.mode()`. F must be 1 + k * 4
        (temporal_compression); H and W multiples of the spatial compression.
        """
        frames, height, width = video.shape[1:4]
        step, space = self.spec.temporal_compression, self.spec.spatial_compression
        if (frames - 1) % step or height % space or width % space:
            raise ValueError(
                f"video of shape {video.shape}: frames must be 1 + k * {step} and height, "
                f"width multiples of {space}"
            )
        latents, cache = self.encode_chunk(video[:, :1])
        chunks = [latents]
        for start in range(1, frames, step):
            latents, cache = self.encode_chunk(video[:, start : start + step], cache)
            chunks.append(latents)
        return jnp.concatenate(chunks, axis=1)

    def decode_chunk(self, latents: jax.Array, cache: Cache = None) -> tuple[jax.Array, Cache]:
        """Latent chunk [B, T', H', W', z_dim] -> (video chunk clamped to [-1, 1], next cache).

        The first chunk (cache None) must be the first latent frame alone.
        """
        video, cache = self.decoder(self.post_quant_conv(latents), cache)
        return jnp.clip(video, -1.0, 1.0), cache

    def decode(self, latents: jax.Array) -> jax.Array:
        """Un-normalised latents [B, F', H', W', z_dim] -> video [B, F, H, W, 3] in [-1, 1].

        Decodes latent frame by latent frame, as diffusers does.
        """
        video, cache = self.decode_chunk(latents[:, :1])
        chunks = [video]
        for index in range(1, latents.shape[1]):
            video, cache = self.decode_chunk(latents[:, index : index + 1], cache)
            chunks.append(video)
        return jnp.concatenate(chunks, axis=1)

    def _latent_stats(self, dtype: jnp.dtype) -> tuple[jax.Array, jax.Array]:
        # The pipelines build mean and 1/std as float32 tensors, then cast to the latents' dtype.
        mean = np.asarray(self.spec.latents_mean, np.float32)
        inv_std = np.float32(1.0) / np.asarray(self.spec.latents_std, np.float32)
        return jnp.asarray(mean, dtype), jnp.asarray(inv_std, dtype)

    def denormalize_latents(self, latents: jax.Array) -> jax.Array:
        """Denoiser latents -> VAE latents, as WanPipeline does before decoding.

        Written `latents / (1 / std) + mean` like the pipeline, not `latents * std + mean`,
        which can differ in the last bit.
        """
        mean, inv_std = self._latent_stats(latents.dtype)
        # XLA rewrites x / broadcast(c) as x * broadcast(1 / c), one ulp off torch's true
        # division here; dividing by a materialised (barriered) broadcast keeps it exact.
        divisor = jax.lax.optimization_barrier(jnp.broadcast_to(inv_std, latents.shape))
        return latents / divisor + mean

    def normalize_latents(self, latents: jax.Array) -> jax.Array:
        """VAE latents -> denoiser latents, as WanImageToVideoPipeline does after encoding."""
        mean, inv_std = self._latent_stats(latents.dtype)
        return (latents - mean) * inv_std

    def decode_to_uint8(self, latents: jax.Array) -> jax.Array:
        """Denoiser latents [B, F', H', W', z_dim] -> frames [B, F, H, W, 3] uint8, on device.

        Follows the pipeline's postprocess: `x * 0.5 + 0.5` clamped to [0, 1] in float32,
        then `round(x * 255)` (round half to even) as diffusers' `numpy_to_pil` does for
        `output_type="pil"`. `export_to_video` of `output_type="np"` frames truncates
        instead (`(x * 255).astype(uint8)`), at most one level darker than this.
        """
        video = self.decode(self.denormalize_latents(latents)).astype(jnp.float32)
        unit = jnp.clip(video * 0.5 + 0.5, 0.0, 1.0)
        return jnp.round(unit * 255.0).astype(jnp.uint8)
