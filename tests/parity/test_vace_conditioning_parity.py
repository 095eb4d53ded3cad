"""The VACE control latents against diffusers' WanVACEPipeline (preprocess_conditions,
prepare_video_latents, prepare_masks) on the same tiny random VAE: control video only,
video with a mask, and with reference images. Both VAEs run in fp32; the tolerance is the
VAE parity's (1e-5 of max|ref|)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tiny_wan import TINY_VAE
from vace_inputs import FRAMES, HEIGHT, WIDTH, MODES, inputs, to_pil, unit
from vae_models import VaeModels

from wanjax.adapters.jax.vae.autoencoder import JaxVideoAutoencoder
from wanjax.domain.modes.vace import mask_latents, nearest_frames, vace_control

RELATIVE_TOLERANCE = 1e-5
VACE_TRANSFORMER = dict(
    num_attention_heads=2, attention_head_dim=8, in_channels=16, out_channels=16, text_dim=16,
    freq_dim=16, ffn_dim=32, num_layers=2, vace_layers=[0], vace_in_channels=96,
)  # fmt: skip


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> tuple[object, JaxVideoAutoencoder]:
    from diffusers import WanVACEPipeline, WanVACETransformer3DModel

    vae = VaeModels(tmp_path_factory.mktemp("vae"), TINY_VAE)
    pipe = WanVACEPipeline(
        tokenizer=None, text_encoder=None, vae=vae.ref, scheduler=None,
        transformer=WanVACETransformer3DModel(**VACE_TRANSFORMER),
    )  # fmt: skip
    return pipe, JaxVideoAutoencoder(vae.load(dtype=np.float32))


def reference(pipe: object, video, mask, references) -> np.ndarray:
    """diffusers' conditioning latents [1, 96, R + F', H', W'] in our layout."""
    with torch.no_grad():
        v, m, refs = pipe.preprocess_conditions(
            *to_pil(video, mask, references), 1, HEIGHT, WIDTH, FRAMES, torch.float32, "cpu"
        )
        latents = pipe.prepare_video_latents(v, m, refs)
        control = torch.cat([latents, pipe.prepare_masks(m, refs)], dim=1)
    return control.numpy().transpose(0, 2, 3, 4, 1)


@pytest.mark.parametrize("mode", MODES)
def test_control_latents_match_diffusers(models, mode: str) -> None:
    pipe, autoencoder = models
    video, mask, references = inputs(mode)
    expected = reference(pipe, video, mask, references)
    got = vace_control(
        autoencoder, unit(video), None if mask is None else mask.astype(np.float32) / 255,
        [unit(r) for r in references], frames=FRAMES, height=HEIGHT, width=WIDTH, temporal=4, spatial=8,
    )  # fmt: skip

    assert got.shape == expected.shape == (1, len(references) + 3, HEIGHT // 8, WIDTH // 8, 96)
    error = np.abs(got - expected).max()
    assert error <= RELATIVE_TOLERANCE * np.abs(expected).max(), f"max abs error {error:.3g}"


def test_mask_folds_pixels_into_channels_and_frames_nearest() -> None:
    mask = np.zeros((FRAMES, 16, 16), np.float32)
    mask[4, 8 + 3, 5] = 1.0  # frame 4, latent pixel (1, 0), channel 3 * 8 + 5
    folded = mask_latents(mask, temporal=4, spatial=8)
    assert folded.shape == (3, 2, 2, 64)
    assert nearest_frames(FRAMES, 3).tolist() == [1, 4, 7]  # 9 frames -> 3: centres of thirds
    assert np.argwhere(folded).tolist() == [[1, 1, 0, 29]]
