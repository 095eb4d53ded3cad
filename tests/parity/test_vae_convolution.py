"""The VAE's 3-D convolutions run per frame (`convolution="frames"`, what CPU runs) equal the
3-D form and diffusers, on both Wan VAEs, through every causal convolution the decoder and
encoder hold (3x3x3, the (3, 1, 1) temporal up- and strided down-sampling, 1x1x1 shortcuts), with
a first chunk's zero context skipped, and the upsamples' 3x3 convolutions run by output phase.

Tiny random VAEs saved by diffusers; 3 latent frames (9 pixel frames), scanned one latent
frame at a time as the product decodes. Layouts: torch [B, C, F, H, W], ours [B, F, H, W, C].
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest
import torch
from flax import nnx

from vae_models import VaeModels, to_ours, to_torch_layout

from wanjax.adapters.jax.vae.layers import CausalConv3d, Conv2d
from wanjax.adapters.jax.vae.model import WanVAE
from wanjax.adapters.jax.vae.runtime import VaeRuntime
from wanjax.adapters.jax.vae.weights import export_vae_weights
from wanjax.application.container import build_container
from wanjax.domain.config import GenerationConfig
from wanjax.domain.errors import ConfigError
from wanjax.domain.specs import WAN22_LATENTS_MEAN, WAN22_LATENTS_STD

# The same products, summed per tap instead of at once: float32 results may differ in the
# last bits (measured: <= 1e-6 of the output's range).
FORM_RTOL = 1e-5
# Against diffusers, as in test_vae_parity.py.
REF_RTOL = 1e-4

CONFIGS = {
    "wan2.1": dict(base_dim=8, z_dim=16, dim_mult=[1, 2, 2, 2], num_res_blocks=1,
                   temperal_downsample=[False, True, True]),
    "wan2.2": dict(base_dim=4, decoder_base_dim=8, z_dim=48, dim_mult=[1, 2, 4, 4], num_res_blocks=1,
                   temperal_downsample=[False, True, True], is_residual=True, patch_size=2, in_channels=12,
                   out_channels=12, scale_factor_spatial=16, latents_mean=list(WAN22_LATENTS_MEAN),
                   latents_std=list(WAN22_LATENTS_STD)),
}  # fmt: skip

decode = nnx.jit(WanVAE.decode)
encode = nnx.jit(WanVAE.encode)


@pytest.fixture(scope="module", params=list(CONFIGS))
def models(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> VaeModels:
    return VaeModels(tmp_path_factory.mktemp(request.param), CONFIGS[request.param])


def assert_close(actual: np.ndarray, expected: np.ndarray, rtol: float) -> None:
    np.testing.assert_allclose(actual, expected, rtol=0, atol=rtol * np.abs(expected).max())


def test_per_frame_decode_equals_the_3d_decode_and_diffusers(models: VaeModels) -> None:
    z = torch.randn(1, models.spec.z_dim, 3, 4, 6, generator=torch.Generator().manual_seed(0))
    by_frame, in_3d = (np.asarray(decode(models.load(decode_chunk=1, convolution=form), to_ours(z)))
                       for form in ("frames", "3d"))  # fmt: skip
    assert_close(by_frame, in_3d, FORM_RTOL)
    with torch.no_grad():
        expected = models.ref.decode(z).sample.numpy()
    assert_close(to_torch_layout(by_frame), expected, REF_RTOL)


def test_per_frame_encode_equals_the_3d_encode_and_diffusers(models: VaeModels) -> None:
    space = models.spec.spatial_compression
    video = torch.rand(1, 3, 9, 2 * space, 3 * space, generator=torch.Generator().manual_seed(1)) * 2 - 1
    by_frame, in_3d = (np.asarray(encode(models.load(encode_chunk=4, convolution=form), to_ours(video)))
                       for form in ("frames", "3d"))  # fmt: skip
    assert_close(by_frame, in_3d, FORM_RTOL)
    with torch.no_grad():
        expected = models.ref.encode(video).latent_dist.mode().numpy()
    assert_close(to_torch_layout(by_frame), expected, REF_RTOL)


@pytest.mark.parametrize(
    ("kernel", "stride", "frames", "zeros"),
    [((3, 3, 3), 1, 5, 0), ((3, 3, 3), 1, 1, 2), ((3, 3, 3), 1, 3, 1), ((3, 1, 1), 2, 7, 0), ((3, 1, 1), 2, 4, 1),
     ((1, 1, 1), 1, 2, 0)],
)  # fmt: skip
def test_a_per_frame_convolution_is_the_3d_one(kernel: tuple[int, int, int], stride: int, frames: int,
                                                zeros: int) -> None:  # fmt: skip
    """Each kernel and time stride the Wan VAEs use, on odd sizes, against the 3-D convolution; with
    leading zero frames (a first chunk's context), whose products the per-frame form skips."""
    x = jnp.asarray(np.random.default_rng(0).standard_normal((2, frames, 5, 7, 3), np.float32))
    padding = (0, kernel[1] // 2, kernel[2] // 2)
    convs = {form: CausalConv3d(3, 4, kernel, VaeRuntime(convolution=form), stride=(stride, 1, 1),
                                padding=padding, rngs=nnx.Rngs(0))
             for form in ("frames", "3d")}  # fmt: skip
    by_frame, in_3d = (np.asarray(conv(x, leading_zeros=zeros)) for conv in convs.values())
    assert by_frame.shape == in_3d.shape == (2, (zeros + frames - kernel[0]) // stride + 1, 5, 7, 4)
    assert_close(by_frame, in_3d, FORM_RTOL)
    padded = jnp.concatenate([jnp.zeros((2, zeros, 5, 7, 3)), x], axis=1)
    assert_close(in_3d, np.asarray(convs["3d"](padded)), 0)


def test_the_upsample_convolution_by_phase_is_the_one_of_the_upsampled_input() -> None:
    """`Conv2d.upsampled` (four 2x2 convolutions of the input) against the 3x3 convolution of
    its nearest-neighbour x2 copy, on odd sizes, borders included."""
    x = jnp.asarray(np.random.default_rng(0).standard_normal((2, 5, 7, 3), np.float32))
    conv = Conv2d(3, 4, 3, VaeRuntime(), padding=((1, 1), (1, 1)), rngs=nnx.Rngs(0))
    conv.bias[...] = jnp.arange(4, dtype=jnp.float32)
    by_phase = np.asarray(nnx.jit(Conv2d.upsampled)(conv, x))
    of_copy = np.asarray(conv(jnp.repeat(jnp.repeat(x, 2, axis=1), 2, axis=2)))
    assert by_phase.shape == of_copy.shape == (2, 10, 14, 4)
    assert_close(by_phase, of_copy, FORM_RTOL)


def test_in_bfloat16_the_taps_are_summed_in_float32_and_rounded_once() -> None:
    """As the 3-D convolution rounds: the same mean error against float32 (summing rounded
    taps in bfloat16 measured 1.27x the 3-D convolution's)."""
    x = jnp.asarray(np.random.default_rng(0).standard_normal((1, 6, 8, 8, 64), np.float32))
    exact = CausalConv3d(64, 64, (3, 3, 3), VaeRuntime(), padding=(0, 1, 1), rngs=nnx.Rngs(0))
    errors = {}
    for form in ("frames", "3d"):
        runtime = VaeRuntime(convolution=form, dtype=jnp.bfloat16, param_dtype=jnp.bfloat16)
        conv = CausalConv3d(64, 64, (3, 3, 3), runtime, padding=(0, 1, 1), rngs=nnx.Rngs(0))
        kernel = exact.weight[...].astype(jnp.bfloat16)
        for param, value in zip(conv.weight, kernel) if form == "frames" else [(conv.weight, kernel)]:
            param[...] = value
        low = np.asarray(conv(x.astype(jnp.bfloat16)), np.float32)
        errors[form] = np.abs(low - np.asarray(exact(x))).mean()
    assert errors["frames"] <= 1.05 * errors["3d"], errors


def test_the_per_frame_form_holds_each_time_tap_as_its_own_weight(models: VaeModels) -> None:
    """Taps sliced from one stacked kernel inside a scan or tile loop are copies that XLA holds
    all at once; stored apart they are read in place. Loading and export map them to diffusers'
    one tensor per convolution."""
    by_frame = models.load(convolution="frames")
    out, into, _, kh, kw = models.tensors["decoder.conv_in.weight"].shape
    assert [tap[...].shape for tap in by_frame.decoder.conv_in.weight] == [(kh, kw, into, out)] * 3
    exported = export_vae_weights(by_frame)
    assert exported.keys() == models.tensors.keys()
    for name, tensor in models.tensors.items():
        np.testing.assert_array_equal(exported[name], tensor, err_msg=name)


@pytest.mark.parametrize(("platform", "form"), [("cpu", "frames"), ("gpu", "3d"), ("tpu", "3d")])
def test_auto_runs_per_frame_on_cpu_only(platform: str, form: str) -> None:
    assert GenerationConfig().resolved(platform).vae.convolution == form
    named = GenerationConfig().with_overrides({"vae_convolution": "3d"})
    assert named.resolved("cpu").vae.convolution == "3d"  # a named form is taken as named


def test_the_product_decodes_per_frame_here() -> None:
    assert build_container(GenerationConfig()).vae_runtime().convolution == "frames"


def test_an_unknown_form_is_named() -> None:
    with pytest.raises(ConfigError, match="vae_convolution='2d': must be one of auto, 3d, frames"):
        GenerationConfig().with_overrides({"vae_convolution": "2d"})
