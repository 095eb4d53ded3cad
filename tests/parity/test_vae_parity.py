"""The JAX Wan 2.1 VAE against diffusers' AutoencoderKLWan on tiny random weights.

Weights go through `save_pretrained` and are read back from the safetensors file, so
the loader sees the real on-disk names. Layouts: torch [B, C, F, H, W], ours
[B, F, H, W, C].
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from diffusers import AutoencoderKLWan
from diffusers.video_processor import VideoProcessor
from flax import nnx

from wanjax.adapters.jax.vae.model import WanVAE
from wanjax.adapters.jax.vae.runtime import VaeRuntime
from wanjax.adapters.jax.vae.weights import export_vae_weights, load_vae
from vae_models import VaeModels, to_ours, to_torch_layout

from wanjax.domain.errors import CheckpointError
from wanjax.domain.specs import VaeSpec

# Decoded video lies in [-1, 1]: 1e-4 absolute is ~800 float32 ulps at 1, room for the
# summation order of torch's and XLA's convs to differ over ~25 layers (measured: 5e-6),
# and far below anything visible (one uint8 level is 7.8e-3).
DECODE_ATOL = 1e-4
# Latent means have no fixed range, so encode is checked relative to max |reference|
# (measured: 1e-6).
ENCODE_RTOL = 1e-4

# The Wan 2.1 layout, shrunk; the variant has flat channels and another temporal pattern.
MAIN = dict(
    base_dim=8, z_dim=16, dim_mult=[1, 2, 2, 2], num_res_blocks=1,
    temperal_downsample=[False, True, True],
)
VARIANT = dict(
    base_dim=8, z_dim=4, dim_mult=[1, 1, 1, 1], num_res_blocks=1,
    temperal_downsample=[True, False, True],
    latents_mean=[0.1, -0.2, 0.3, -0.4], latents_std=[1.5, 2.0, 0.5, 1.0],
)


class Pair(VaeModels):
    """The reference, ours loaded from its tensors, and jitted calls."""

    def __init__(self, folder: Path, config: dict) -> None:
        super().__init__(folder, config)
        self.ours = self.load()
        self.encode: Callable[[WanVAE, jax.Array], jax.Array] = nnx.jit(WanVAE.encode)
        self.decode: Callable[[WanVAE, jax.Array], jax.Array] = nnx.jit(WanVAE.decode)


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Pair:
    return Pair(tmp_path_factory.mktemp("vae_main"), MAIN)


@pytest.fixture(scope="module")
def variant(tmp_path_factory: pytest.TempPathFactory) -> Pair:
    return Pair(tmp_path_factory.mktemp("vae_variant"), VARIANT)


@pytest.mark.parametrize(("model", "latent_frames"), [("pair", 1), ("pair", 2), ("pair", 3), ("variant", 3)])
def test_decode_matches_diffusers(request: pytest.FixtureRequest, model: str, latent_frames: int) -> None:
    pair: Pair = request.getfixturevalue(model)
    z = torch.randn(2, pair.spec.z_dim, latent_frames, 4, 6, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = pair.ref.decode(z).sample.numpy()
    got = to_torch_layout(pair.decode(pair.ours, to_ours(z)))
    assert got.shape == expected.shape == (2, 3, 1 + 4 * (latent_frames - 1), 32, 48)
    np.testing.assert_allclose(got, expected, rtol=0, atol=DECODE_ATOL)


@pytest.mark.parametrize(("model", "frames"), [("pair", 1), ("pair", 5), ("pair", 9), ("variant", 9)])
def test_encode_mode_matches_diffusers(request: pytest.FixtureRequest, model: str, frames: int) -> None:
    pair: Pair = request.getfixturevalue(model)
    video = torch.rand(1, 3, frames, 32, 48, generator=torch.Generator().manual_seed(2)) * 2 - 1
    with torch.no_grad():
        expected = pair.ref.encode(video).latent_dist.mode().numpy()
    got = to_torch_layout(pair.encode(pair.ours, to_ours(video)))
    assert got.shape == expected.shape == (1, pair.spec.z_dim, 1 + (frames - 1) // 4, 4, 6)
    np.testing.assert_allclose(got, expected, rtol=0, atol=ENCODE_RTOL * np.abs(expected).max())


def test_encode_rejects_partial_chunks(pair: Pair) -> None:
    with pytest.raises(ValueError, match="1 \\+ k \\* 4"):
        pair.ours.encode(jnp.zeros((1, 4, 32, 48, 3)))


def test_latent_normalization_matches_the_pipelines(pair: Pair) -> None:
    z = torch.randn(1, pair.spec.z_dim, 2, 4, 6, generator=torch.Generator().manual_seed(3))
    shape = (1, pair.spec.z_dim, 1, 1, 1)
    mean = torch.tensor(pair.ref.config.latents_mean).view(shape)
    inv_std = 1.0 / torch.tensor(pair.ref.config.latents_std).view(shape)
    # WanPipeline before decoding; WanImageToVideoPipeline after encoding the condition.
    denormalized = (z / inv_std + mean).numpy()
    normalized = ((z - mean) * inv_std).numpy()
    np.testing.assert_array_equal(to_torch_layout(pair.ours.denormalize_latents(to_ours(z))), denormalized)
    np.testing.assert_array_equal(to_torch_layout(pair.ours.normalize_latents(to_ours(z))), normalized)


def test_decode_to_uint8_matches_the_pipeline_postprocess(pair: Pair) -> None:
    z = torch.randn(2, pair.spec.z_dim, 1, 4, 6, generator=torch.Generator().manual_seed(4))
    shape = (1, pair.spec.z_dim, 1, 1, 1)
    mean = torch.tensor(pair.ref.config.latents_mean).view(shape)
    inv_std = 1.0 / torch.tensor(pair.ref.config.latents_std).view(shape)
    with torch.no_grad():
        video = pair.ref.decode(z / inv_std + mean).sample
    processor = VideoProcessor(vae_scale_factor=8)
    clips = processor.postprocess_video(video, "pil")
    pil = np.stack([np.stack([np.asarray(frame) for frame in clip]) for clip in clips])
    # What export_to_video writes for output_type="np" (WanPipeline's default).
    exported = (processor.postprocess_video(video, "np") * 255).astype(np.uint8)
    got = jax.jit(lambda m, z: m.decode_to_uint8(z))(pair.ours, to_ours(z))
    assert got.dtype == jnp.uint8 and got.shape == pil.shape == (2, 1, 32, 48, 3)
    got = np.asarray(got).astype(np.int16)
    assert np.abs(got - pil).max() <= 1
    assert np.abs(got - exported).max() <= 1


def test_export_inverts_load_exactly(pair: Pair) -> None:
    exported = export_vae_weights(pair.ours)
    assert exported.keys() == pair.tensors.keys()
    for name, tensor in pair.tensors.items():
        assert exported[name].dtype == tensor.dtype, name
        np.testing.assert_array_equal(exported[name], tensor, err_msg=name)


def test_bfloat16_runtime_decodes_close_to_float32(pair: Pair) -> None:
    runtime = VaeRuntime(dtype=jnp.bfloat16, param_dtype=jnp.bfloat16)
    ours = load_vae(pair.spec, runtime, pair.tensors)
    assert all(v.dtype == jnp.bfloat16 for v in jax.tree.leaves(nnx.state(ours)))
    z = jax.random.normal(jax.random.key(5), (2, 2, 4, 6, pair.spec.z_dim))  # shape of a decode test
    low = pair.decode(ours, z.astype(jnp.bfloat16))
    assert low.dtype == jnp.bfloat16
    np.testing.assert_allclose(np.asarray(low, np.float32), np.asarray(pair.decode(pair.ours, z)), atol=0.1)


def test_missing_tensor_is_named(pair: Pair) -> None:
    tensors = dict(pair.tensors)
    name = "decoder.up_blocks.0.resnets.0.norm1.gamma"
    del tensors[name]
    with pytest.raises(CheckpointError, match=re.escape(f"missing tensors [{name}]")):
        load_vae(pair.spec, VaeRuntime(), tensors)


def test_unexpected_tensor_is_named(pair: Pair) -> None:
    tensors = {**pair.tensors, "decoder.extra.weight": np.zeros(3, np.float32)}
    with pytest.raises(CheckpointError, match=re.escape("unexpected tensors [decoder.extra.weight]")):
        load_vae(pair.spec, VaeRuntime(), tensors)


@pytest.mark.parametrize("form", ["3d", "frames"])  # frames: the kernel is held as its time taps
def test_misshapen_tensor_is_named_with_both_shapes(pair: Pair, form: str) -> None:
    name = "encoder.conv_in.weight"
    expected = pair.tensors[name].shape
    for found in ((expected[0] + 1, *expected[1:]), (*expected[:2], 2, *expected[3:])):
        tensors = {**pair.tensors, name: np.zeros(found, np.float32)}
        with pytest.raises(CheckpointError, match=re.escape(f"{name}: expected shape {expected}, found {found}")):
            load_vae(pair.spec, VaeRuntime(convolution=form), tensors)


def test_the_released_layout_loads_and_exports() -> None:
    """Two residual blocks per level and dim_mult [1, 2, 4, 4], as released, at width 4."""
    torch.manual_seed(0)
    ref = AutoencoderKLWan(base_dim=4)
    tensors = {name: t.numpy() for name, t in ref.state_dict().items()}
    spec = VaeSpec.from_diffusers_config(dict(ref.config))
    exported = export_vae_weights(load_vae(spec, VaeRuntime(), tensors))
    assert exported.keys() == tensors.keys()
    assert all(np.array_equal(exported[name], tensor) for name, tensor in tensors.items())


def test_released_size_shapes() -> None:
    """The default spec (the released Wan 2.1 VAE) at 480x832, traced abstractly."""
    vae = nnx.eval_shape(lambda: WanVAE(VaeSpec(), VaeRuntime(), rngs=nnx.Rngs(0)))
    latents = jax.ShapeDtypeStruct((1, 2, 60, 104, 16), jnp.float32)
    video = jax.ShapeDtypeStruct((1, 5, 480, 832, 3), jnp.float32)
    assert nnx.eval_shape(lambda m, z: m.decode(z), vae, latents).shape == video.shape
    assert nnx.eval_shape(lambda m, x: m.encode(x), vae, video).shape == latents.shape
