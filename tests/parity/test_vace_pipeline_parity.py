"""VACE generation against diffusers' WanVACEPipeline on the same tiny random VAE and VACE
transformer (written by save_pretrained) with the same prompt embeddings and initial noise:
control latents (domain/vace.py, our VAE), then the denoiser (CFG, UniPC-2 with diffusers'
sigmas, KV cache, per-layer-free conditioning scale). Final latents within 1e-4 of max|ref|
in fp32, as the T2V pipeline parity, for control video only, with a mask, and with
reference images (their latent frames prepended, R more latent frames generated)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tiny_wan import FLOW_SHIFT, TINY_VAE
from transformer_models import SavedReference, runtime
from vace_inputs import FRAMES, HEIGHT, MODES, WIDTH, inputs, to_pil, unit
from vae_models import VaeModels

from wanjax.adapters.jax.vae.autoencoder import JaxVideoAutoencoder
from wanjax.adapters.jax.denoising.denoiser import DenoiserOptions, JaxDenoiser
from wanjax.adapters.jax.transformer.weights import load_transformer
from wanjax.domain.extensions.vace import VACE_EXTENSION
from wanjax.domain.modes.vace import vace_control
from wanjax.domain.conditioning import Conditioning
from wanjax.domain.plan import plan_sampling
from wanjax.domain.requests import GenerationRequest

STEPS, GUIDANCE, SCALE, TEXT_TOKENS = 4, 5.0, 0.8, 6
RELATIVE_TOLERANCE = 1e-4
VACE_TRANSFORMER = dict(
    num_attention_heads=2, attention_head_dim=12, in_channels=16, out_channels=16, text_dim=32,
    freq_dim=32, ffn_dim=32, num_layers=3, vace_layers=[0, 2], vace_in_channels=96, rope_max_seq_len=32,
)  # fmt: skip


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory):
    from diffusers import UniPCMultistepScheduler, WanVACEPipeline

    vae = VaeModels(tmp_path_factory.mktemp("vae"), TINY_VAE)
    transformer = SavedReference(VACE_TRANSFORMER, tmp_path_factory.mktemp("vace"), "WanVACETransformer3DModel")
    scheduler = UniPCMultistepScheduler(prediction_type="flow_prediction", use_flow_sigmas=True, flow_shift=FLOW_SHIFT)
    pipe = WanVACEPipeline(
        tokenizer=None, text_encoder=None, vae=vae.ref, scheduler=scheduler, transformer=transformer.model
    )
    pipe.set_progress_bar_config(disable=True)
    ours = load_transformer(transformer.spec, runtime(True), transformer.tensors)
    return pipe, JaxVideoAutoencoder(vae.load(dtype=np.float32)), JaxDenoiser([ours], DenoiserOptions())


@pytest.mark.parametrize("mode", MODES)
def test_final_latents_match_diffusers(models, mode: str) -> None:
    pipe, autoencoder, denoiser = models
    video, mask, references = inputs(mode)
    rng = np.random.default_rng(1)
    context, negative = (rng.standard_normal((1, TEXT_TOKENS, 32), dtype=np.float32) for _ in range(2))
    latent_frames = len(references) + (FRAMES - 1) // 4 + 1
    initial = rng.standard_normal((1, 16, latent_frames, HEIGHT // 8, WIDTH // 8), dtype=np.float32)
    pil_video, pil_mask, pil_references = to_pil(video, mask, references)
    expected = pipe(
        video=pil_video, mask=pil_mask, reference_images=pil_references, conditioning_scale=SCALE,
        prompt_embeds=torch.from_numpy(context), negative_prompt_embeds=torch.from_numpy(negative),
        height=HEIGHT, width=WIDTH, num_frames=FRAMES, num_inference_steps=STEPS, guidance_scale=GUIDANCE,
        latents=torch.from_numpy(initial), output_type="latent",
    ).frames.numpy().transpose(0, 2, 3, 4, 1)  # fmt: skip

    control = vace_control(
        autoencoder, unit(video), None if mask is None else mask.astype(np.float32) / 255,
        [unit(r) for r in references], frames=FRAMES, height=HEIGHT, width=WIDTH, temporal=4, spatial=8,
    )  # fmt: skip
    request = GenerationRequest(
        prompt="p", height=HEIGHT, width=WIDTH, num_frames=FRAMES, num_inference_steps=STEPS,
        guidance_scale=GUIDANCE, flow_shift=FLOW_SHIFT, sigma_schedule="diffusers",
    )  # fmt: skip
    conditioning = Conditioning(extensions=VACE_EXTENSION.given(control=control, scale=np.float32(SCALE)))
    got = denoiser.session(plan_sampling(request), context, negative).denoise(
        initial.transpose(0, 2, 3, 4, 1), conditioning=conditioning
    ).latents

    error = np.abs(np.asarray(got) - expected).max()
    assert error <= RELATIVE_TOLERANCE * np.abs(expected).max(), f"max abs error {error:.3g}"
