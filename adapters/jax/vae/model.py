"""The Wan VAE (diffusers' AutoencoderKLWan: Wan 2.1, z_dim 16, or Wan 2.2, z_dim 48) in Flax NNX.

Video is [B, F, H, W, 3] in [-1, 1]; latents are [B, F', H', W', z_dim] with
F' = 1 + (F - 1) / 4 and H' = H / s, W' = W / s, s = `spatial_compression` (8 for
2.1, 16 for 2.2: 8 from the VAE times its 2x2 patchify). Both halves run over time
in chunks that carry each layer's cache (see `temporal.py`), optionally over
spatial tiles (see `tiling.py`), as the `VaeRuntime` says.
"""

from __future__ import annotations

import attrs
import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from wanjax.adapters.jax.vae.decoder import Decoder3d
from wanjax.adapters.jax.vae.encoder import Encoder3d
from wanjax.adapters.jax.vae.layers import CausalConv3d
from wanjax.adapters.jax.vae.runtime import VaeRuntime
from wanjax.adapters.jax.vae.sharding import Constrain
from wanjax.adapters.jax.vae.shuffles import patchify, unpatchify
from wanjax.adapters.jax.vae.temporal import stream
from wanjax.adapters.jax.vae.tiling import decode_tiles, encode_tiles, tiled_map
from wanjax.domain.errors import ConfigError
from wanjax.domain.specs import VaeSpec


def _check_runtime(spec: VaeSpec, runtime: VaeRuntime) -> None:
    step = spec.temporal_compression
    if runtime.encode_chunk is not None and runtime.encode_chunk % step:
        raise ConfigError(
            f"vae encode_chunk={runtime.encode_chunk}: must be a multiple of {step} pixel frames "
            "(the VAE's temporal compression)"
        )
    tiling = runtime.tiling
    if tiling is not None:
        for name, value in attrs.asdict(tiling).items():
            # Off-grid sizes would make diffusers' floor divisions disagree on where tiles go.
            if value % spec.spatial_compression:
                raise ConfigError(
                    f"vae tiling {name}={value}: must be a multiple of {spec.spatial_compression} "
                    "pixels (one latent)"
                )


class WanVAE(nnx.Module):
    """Encoder, decoder and the 1x1x1 convs around the latent (`quant_conv`, `post_quant_conv`)."""

    def __init__(self, spec: VaeSpec, runtime: VaeRuntime, *, rngs: nnx.Rngs) -> None:
        _check_runtime(spec, runtime)
        self.spec = spec
        self.runtime = runtime
        z = spec.z_dim
        self.encoder = Encoder3d(spec, runtime, rngs=rngs)
        self.quant_conv = CausalConv3d(2 * z, 2 * z, (1, 1, 1), runtime, rngs=rngs)
        self.post_quant_conv = CausalConv3d(z, z, (1, 1, 1), runtime, rngs=rngs)
        self.decoder = Decoder3d(spec, runtime, rngs=rngs)

    def _encode_patches(self, x: jax.Array) -> jax.Array:
        """Patchified video [B, F, h, w, in_channels] -> latent mean [B, F', h / 8, w / 8, z_dim]."""
        moments = stream(
            self.encoder, x, chunk=self.runtime.encode_chunk, unrolled_size=self.spec.temporal_compression
        )  # [B, F', h/8, w/8, 2 z_dim]
        # The posterior's mode is its mean, the first half of the moments' channels.
        return self.quant_conv(moments)[..., : self.spec.z_dim]

    def encode(self, video: jax.Array) -> jax.Array:
        """Video [B, F, H, W, 3] in [-1, 1] -> un-normalised latent mean [B, F', H', W', z_dim].

        Matches diffusers' `vae.encode(x).latent_dist.mode()`, tiled as diffusers' tiled
        encode when `runtime.tiling` is set. F must be 1 + k * 4 (temporal_compression);
        H and W multiples of the spatial compression.
        """
        frames, height, width = video.shape[1:4]
        step, space = self.spec.temporal_compression, self.spec.spatial_compression
        if (frames - 1) % step or height % space or width % space:
            raise ValueError(
                f"video of shape {video.shape}: frames must be 1 + k * {step} and height, "
                f"width multiples of {space}"
            )
        x = patchify(video, self.spec.patch)
        grid = None if self.runtime.tiling is None else encode_tiles(self.runtime.tiling, self.spec, height, width)
        if grid is None:
            return self._encode_patches(x)
        return tiled_map(self._encode_patches, x, *grid)

    def _decode_patches(self, latents: jax.Array, constrain: Constrain | None = None) -> jax.Array:
        """Latents [B, F', H', W', z_dim] -> decoder output [B, F, 8 H', 8 W', out_channels], unclamped."""
        x = self.post_quant_conv(latents)
        return stream(self.decoder, x, chunk=self.runtime.decode_chunk, unrolled_size=1, constrain=constrain)

    def decode(self, latents: jax.Array, constrain: Constrain | None = None) -> jax.Array:
        """Un-normalised latents [B, F', H', W', z_dim] -> video [B, F, H, W, 3] in [-1, 1].

        Matches diffusers' `vae.decode(z)`, tiled as diffusers' tiled decode when
        `runtime.tiling` is set (tiles are blended before unpatchify and clamping, as there).
        `constrain` pins the layout of every temporal chunk (spatial sharding, `sharding.py`);
        a tiled decode does not use it.
        """
        height, width = latents.shape[2:4]
        grid = None if self.runtime.tiling is None else decode_tiles(self.runtime.tiling, self.spec, height, width)
        if grid is None:
            video = self._decode_patches(latents, constrain)
        else:
            video = tiled_map(self._decode_patches, latents, *grid)
        return jnp.clip(unpatchify(video, self.spec.patch), -1.0, 1.0)

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

    def decode_to_unit(self, latents: jax.Array, constrain: Constrain | None = None) -> jax.Array:
        """Denoiser latents [B, F', H', W', z_dim] -> frames [B, F, H, W, 3] float32 in [0, 1].

        The pipeline's postprocess before quantisation: `x * 0.5 + 0.5` clamped, in float32.
        """
        video = self.decode(self.denormalize_latents(latents), constrain).astype(jnp.float32)
        return jnp.clip(video * 0.5 + 0.5, 0.0, 1.0)

    def decode_to_uint8(self, latents: jax.Array, constrain: Constrain | None = None) -> jax.Array:
        """Denoiser latents [B, F', H', W', z_dim] -> frames [B, F, H, W, 3] uint8, on device.

        `round(decode_to_unit * 255)` (round half to even) as diffusers' `numpy_to_pil`
        does for `output_type="pil"`. `export_to_video` of `output_type="np"` frames
        truncates instead (`(x * 255).astype(uint8)`), at most one level darker than this.
        """
        return to_uint8(self.decode_to_unit(latents, constrain))


def to_uint8(unit: jax.Array) -> jax.Array:
    """Frames in [0, 1] -> uint8 levels, `round(x * 255)` (round half to even, as `numpy_to_pil`)."""
    return jnp.round(unit * 255.0).astype(jnp.uint8)
