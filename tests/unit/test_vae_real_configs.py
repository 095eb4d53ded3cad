"""The released Wan 2.1 and 2.2 VAE configs build abstractly, with diffusers' parameter counts.

Nothing is materialised: ours under `nnx.eval_shape`, diffusers' on the meta device.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from diffusers import AutoencoderKLWan
from flax import nnx

from wanjax.adapters.jax.vae.model import WanVAE
from wanjax.adapters.jax.vae.runtime import VaeRuntime, VaeTiling
from wanjax.adapters.torch.diffusers_bench import diffusers_config
from wanjax.domain.architectures import WAN21_VAE, WAN22_VAE
from wanjax.domain.errors import ConfigError, UnsupportedModelError
from wanjax.domain.specs import WAN22_LATENTS_MEAN, WAN22_LATENTS_STD, VaeSpec

# Wan-AI/Wan2.2-TI2V-5B-Diffusers vae/config.json (clip_output is not an AutoencoderKLWan argument).
WAN22_CONFIG = dict(
    base_dim=160, decoder_base_dim=256, z_dim=48, dim_mult=[1, 2, 4, 4], num_res_blocks=2, attn_scales=[],
    temperal_downsample=[False, True, True], dropout=0.0, is_residual=True, in_channels=12, out_channels=12,
    patch_size=2, scale_factor_spatial=16, scale_factor_temporal=4,
    latents_mean=list(WAN22_LATENTS_MEAN), latents_std=list(WAN22_LATENTS_STD),
)  # fmt: skip


def _abstract(spec: VaeSpec) -> WanVAE:
    return nnx.eval_shape(lambda: WanVAE(spec, VaeRuntime(), rngs=nnx.Rngs(0)))


@pytest.mark.parametrize("spec", [WAN21_VAE, WAN22_VAE], ids=["wan2.1", "wan2.2"])
def test_parameter_count_matches_diffusers(spec: VaeSpec) -> None:
    with torch.device("meta"):
        reference = AutoencoderKLWan(**diffusers_config(spec))
    expected = sum(p.numel() for p in reference.parameters())
    assert VaeSpec.from_diffusers_config(dict(reference.config)) == spec
    ours = sum(int(np.prod(v.shape)) for v in jax.tree.leaves(nnx.state(_abstract(spec), nnx.Param)))
    assert ours == expected


def test_wan21_vae_is_diffusers_default_config() -> None:
    """Wan-AI/Wan2.1-T2V-*-Diffusers vae/config.json sets base_dim 96, z_dim 16: diffusers' defaults."""
    with torch.device("meta"):
        reference = AutoencoderKLWan(base_dim=96, z_dim=16)
    assert VaeSpec.from_diffusers_config(dict(reference.config)) == WAN21_VAE


def test_wan22_factory_is_the_released_config() -> None:
    assert WAN22_VAE == VaeSpec.from_diffusers_config({**WAN22_CONFIG, "clip_output": False})


def test_wan22_released_size_shapes() -> None:
    """704 x 1280, 17 frames (a TI2V-5B size) -> latents [1, 5, 44, 80, 48], and back."""
    vae = _abstract(VaeSpec.wan22())
    latents = jax.ShapeDtypeStruct((1, 5, 44, 80, 48), jnp.float32)
    video = jax.ShapeDtypeStruct((1, 17, 704, 1280, 3), jnp.float32)
    assert nnx.eval_shape(lambda m, z: m.decode(z), vae, latents).shape == video.shape
    assert nnx.eval_shape(lambda m, x: m.encode(x), vae, video).shape == latents.shape


def test_wan22_released_size_traces_scanned_tiled_in_bfloat16() -> None:
    """The production setting: bf16, scanned chunks (the carry keeps its dtypes), diffusers' tiles."""
    runtime = VaeRuntime(
        dtype=jnp.bfloat16, param_dtype=jnp.bfloat16, decode_chunk=2, encode_chunk=8, tiling=VaeTiling()
    )
    vae = nnx.eval_shape(lambda: WanVAE(VaeSpec.wan22(), runtime, rngs=nnx.Rngs(0)))
    latents = jax.ShapeDtypeStruct((1, 5, 44, 80, 48), jnp.float32)
    video = jax.ShapeDtypeStruct((1, 17, 704, 1280, 3), jnp.float32)
    decoded = nnx.eval_shape(lambda m, z: m.decode_to_uint8(z), vae, latents)
    assert (decoded.shape, decoded.dtype) == (video.shape, jnp.uint8)
    assert nnx.eval_shape(lambda m, x: m.encode(x), vae, video).shape == latents.shape


@pytest.mark.parametrize(
    "config, message",
    [
        ({**WAN22_CONFIG, "scale_factor_spatial": 8}, "scale_factor_spatial=8"),
        ({**WAN22_CONFIG, "in_channels": 3}, "in_channels=3"),
        ({**WAN22_CONFIG, "latents_std": [1.0] * 16}, "z_dim=48"),
    ],
)
def test_inconsistent_wan22_configs_are_named(config: dict, message: str) -> None:
    with pytest.raises(UnsupportedModelError, match=message):
        VaeSpec.from_diffusers_config(config)


@pytest.mark.parametrize(
    "runtime, message",
    [
        (dict(encode_chunk=6), "encode_chunk=6"),
        (dict(tiling=VaeTiling(tile_sample_stride_width=200)), "stride_width=200: must be a multiple of 16"),
    ],
)
def test_runtime_that_does_not_fit_the_spec_is_named(runtime: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        nnx.eval_shape(lambda: WanVAE(VaeSpec.wan22(), VaeRuntime(**runtime), rngs=nnx.Rngs(0)))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(decode_chunk=0), "decode_chunk=0"),
        (dict(tiling=dict(tile_sample_min_height=128)), "exceeds tile_sample_min_height"),
    ],
)
def test_bad_runtime_values_are_named(kwargs: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        tiling = kwargs.pop("tiling", None)
        VaeRuntime(**kwargs, tiling=VaeTiling(**tiling) if tiling else None)
