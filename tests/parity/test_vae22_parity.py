"""The JAX Wan 2.2 VAE against diffusers' AutoencoderKLWan (is_residual, patch_size 2) on tiny random weights.

Weights go through `save_pretrained` and are read back from the safetensors file, so
the loader sees the real on-disk names. Layouts: torch [B, C, F, H, W], ours
[B, F, H, W, C]. Tolerances as in test_vae_parity.py (decode 1e-4 absolute on [-1, 1],
encode 1e-4 of max |reference|).
"""

from __future__ import annotations

import re
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest
import torch
from diffusers import AutoencoderKLWan
from flax import nnx

from wanjax.adapters.jax.vae.model import WanVAE
from wanjax.adapters.jax.vae.runtime import VaeRuntime
from wanjax.adapters.jax.vae.weights import export_vae_weights, load_vae
from tiny_wan import TINY_VAE22
from vae_models import VaeModels, to_ours, to_torch_layout

from wanjax.domain.errors import CheckpointError
from wanjax.domain.specs import WAN22_LATENTS_MEAN, WAN22_LATENTS_STD, VaeSpec

DECODE_ATOL = 1e-4
ENCODE_RTOL = 1e-4

WAN22_TINY = TINY_VAE22


class Pair(VaeModels):
    """The reference and ours loaded from its tensors."""

    def __init__(self, folder: Path, config: dict) -> None:
        super().__init__(folder, config)
        self.ours = self.load()


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Pair:
    return Pair(tmp_path_factory.mktemp("vae22"), WAN22_TINY)


def test_the_config_reads_as_the_wan22_vae(pair: Pair) -> None:
    spec = pair.spec
    assert (spec.is_residual, spec.patch, spec.decoder_dim, spec.z_dim) == (True, 2, 8, 48)
    assert (spec.spatial_compression, spec.temporal_compression) == (16, 4)


@pytest.mark.parametrize("latent_frames", [1, 2, 3])
def test_decode_matches_diffusers(pair: Pair, latent_frames: int) -> None:
    z = torch.randn(1, 48, latent_frames, 2, 3, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = pair.ref.decode(z).sample.numpy()
    got = to_torch_layout(nnx.jit(WanVAE.decode)(pair.ours, to_ours(z)))
    assert got.shape == expected.shape == (1, 3, 1 + 4 * (latent_frames - 1), 32, 48)
    np.testing.assert_allclose(got, expected, rtol=0, atol=DECODE_ATOL)


@pytest.mark.parametrize("frames", [1, 5, 9])
def test_encode_mode_matches_diffusers(pair: Pair, frames: int) -> None:
    video = torch.rand(1, 3, frames, 32, 48, generator=torch.Generator().manual_seed(2)) * 2 - 1
    with torch.no_grad():
        expected = pair.ref.encode(video).latent_dist.mode().numpy()
    got = to_torch_layout(nnx.jit(WanVAE.encode)(pair.ours, to_ours(video)))
    assert got.shape == expected.shape == (1, 48, 1 + (frames - 1) // 4, 2, 3)
    np.testing.assert_allclose(got, expected, rtol=0, atol=ENCODE_RTOL * np.abs(expected).max())


def test_encode_needs_multiples_of_16_pixels(pair: Pair) -> None:
    with pytest.raises(ValueError, match="multiples of 16"):
        pair.ours.encode(jnp.zeros((1, 1, 24, 48, 3)))


def test_latent_normalization_uses_the_48_statistics(pair: Pair) -> None:
    z = torch.randn(1, 48, 1, 2, 3, generator=torch.Generator().manual_seed(3))
    mean = torch.tensor(WAN22_LATENTS_MEAN).view(1, 48, 1, 1, 1)
    inv_std = 1.0 / torch.tensor(WAN22_LATENTS_STD).view(1, 48, 1, 1, 1)
    np.testing.assert_array_equal(
        to_torch_layout(pair.ours.denormalize_latents(to_ours(z))), (z / inv_std + mean).numpy()
    )


def test_export_inverts_load_exactly(pair: Pair) -> None:
    exported = export_vae_weights(pair.ours)
    assert exported.keys() == pair.tensors.keys()
    for name, tensor in pair.tensors.items():
        assert exported[name].dtype == tensor.dtype, name
        np.testing.assert_array_equal(exported[name], tensor, err_msg=name)


def test_missing_wan22_tensor_is_named(pair: Pair) -> None:
    name = "decoder.up_blocks.0.upsampler.time_conv.weight"
    tensors = {k: v for k, v in pair.tensors.items() if k != name}
    with pytest.raises(CheckpointError, match=re.escape(f"missing tensors [{name}]")):
        load_vae(pair.spec, VaeRuntime(), tensors)


def test_wan21_tensors_do_not_load_as_wan22(pair: Pair) -> None:
    """A 2.1-named upsampler (`upsamplers.0`) where 2.2 has `upsampler` is both missing and unexpected."""
    tensors = {k.replace("up_blocks.0.upsampler.", "up_blocks.0.upsamplers.0."): v for k, v in pair.tensors.items()}
    with pytest.raises(CheckpointError, match=r"missing tensors \[decoder\.up_blocks\.0\.upsampler\..*unexpected"):
        load_vae(pair.spec, VaeRuntime(), tensors)


def test_misshapen_wan22_tensor_is_named_with_both_shapes(pair: Pair) -> None:
    name = "encoder.conv_in.weight"  # [out, 12, 3, 3, 3]: 12 = RGB x 2 x 2
    expected = pair.tensors[name].shape
    tensors = {**pair.tensors, name: np.zeros((expected[0], 3, *expected[2:]), np.float32)}
    with pytest.raises(CheckpointError, match=re.escape(f"{name}: expected shape {expected}")):
        load_vae(pair.spec, VaeRuntime(), tensors)


def test_the_released_layout_loads_and_exports() -> None:
    """Two residual blocks per level, dim_mult [1, 2, 4, 4] and the 160 / 256 width ratio, shrunk."""
    torch.manual_seed(0)
    ref = AutoencoderKLWan(**{**WAN22_TINY, "base_dim": 10, "decoder_base_dim": 16, "num_res_blocks": 2})
    tensors = {name: t.numpy() for name, t in ref.state_dict().items()}
    spec = VaeSpec.from_diffusers_config(dict(ref.config))
    exported = export_vae_weights(load_vae(spec, VaeRuntime(), tensors))
    assert exported.keys() == tensors.keys()
    assert all(np.array_equal(exported[name], tensor) for name, tensor in tensors.items())
