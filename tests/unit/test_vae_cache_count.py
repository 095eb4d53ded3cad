"""The memory plan counts the VAE's caches from the spec alone; the JAX model's own caches agree."""

import math

import jax
import numpy as np
import pytest
from flax import nnx

from wanjax.adapters.jax.vae.model import WanVAE
from wanjax.adapters.jax.vae.runtime import VaeRuntime
from wanjax.domain.architectures import WAN21_VAE, WAN22_VAE
from wanjax.domain.vae_memory import (
    VAE_CONTEXT_FRAMES,
    vae_decoder_cache_channels_per_pixel,
    vae_encoder_cache_channels_per_pixel,
)

PIXELS = 64 * 128  # output pixels: 4 x 8 latents of the Wan 2.1 VAE, 2 x 4 of the Wan 2.2 VAE


def _cache_elements(vae: nnx.Module, half: str, x: jax.ShapeDtypeStruct) -> int:
    """Elements of the cache one chunk of `half` (encoder or decoder) hands to the next."""
    graphdef, params = nnx.split(vae)
    _, cache = jax.eval_shape(lambda p, x: getattr(nnx.merge(graphdef, p), half)(x, None), params, x)
    return sum(math.prod(leaf.shape) for leaf in jax.tree.leaves(cache))


@pytest.mark.parametrize("spec", [WAN21_VAE, WAN22_VAE], ids=["2.1", "2.2"])
def test_cache_channels_are_the_models_caches(spec) -> None:
    vae = nnx.eval_shape(lambda: WanVAE(spec, VaeRuntime(), rngs=nnx.Rngs(0)))
    s, p = spec.spatial_compression, spec.patch
    latents = jax.ShapeDtypeStruct((1, 1, 64 // s, 128 // s, spec.z_dim), np.float32)
    video = jax.ShapeDtypeStruct((1, 1, 64 // p, 128 // p, spec.in_channels), np.float32)
    per_pixel = VAE_CONTEXT_FRAMES * PIXELS
    assert _cache_elements(vae, "decoder", latents) / per_pixel == vae_decoder_cache_channels_per_pixel(spec)
    assert _cache_elements(vae, "encoder", video) / per_pixel == vae_encoder_cache_channels_per_pixel(spec)
