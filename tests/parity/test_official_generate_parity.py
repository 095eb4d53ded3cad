"""Final latents of the Wan code's own loop (`WanT2V.generate`) against wanjax's denoiser.

Tiny official `WanModel`s (2 layers, seeded; every parameter perturbed, since the official
init leaves the head at zero) are written as original-name safetensors and loaded by
wanjax the way `transformer_file` loads them. Both sides get the same noise (generate's own
`torch.randn` from its seed), the same text context (a stand-in text encoder; WanModel pads
it to text_len with zeros, wanjax is given it padded) and the same guidance; the official
pipeline decodes with a stand-in VAE that returns the latents. One expert (boundary 0: the
high-noise model at every step) and two (boundary 0.875, a guidance scale each), unipc and
dpm++, on the default sigma_schedule=official.

Tolerance: 1e-4 of max|ref| (fp32; transformer passes ~1e-6 apart accumulate over the
steps; measured 2.7e-7 to 7.0e-7). The same two-expert run on the diffusers grid is 2.8e-2
off, so these tests fail if the default grid is not the official one.
"""

from __future__ import annotations

import types

import jax.numpy as jnp
import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from official_wan import official_pipeline, official_wan
from wanjax.adapters.checkpoints.original_names import transformer_weights
from wanjax.adapters.jax.denoising.denoiser import JaxDenoiser
from wanjax.adapters.jax.transformer.runtime import TransformerRuntime
from wanjax.adapters.jax.transformer.weights import load_transformer
from wanjax.domain.plan import plan_sampling
from wanjax.domain.requests import GenerationRequest
from wanjax.domain.specs import TransformerSpec

TEXT_LEN, TEXT_DIM, HEADS, HEAD_DIM, LATENT_CHANNELS = 16, 32, 2, 12, 16
WAN_MODEL = dict(
    model_type="t2v", patch_size=(1, 2, 2), text_len=TEXT_LEN, in_dim=LATENT_CHANNELS, dim=HEADS * HEAD_DIM,
    ffn_dim=32, freq_dim=32, text_dim=TEXT_DIM, out_dim=LATENT_CHANNELS, num_heads=HEADS, num_layers=2,
)  # fmt: skip
SPEC = TransformerSpec(
    num_attention_heads=HEADS, attention_head_dim=HEAD_DIM, in_channels=LATENT_CHANNELS,
    out_channels=LATENT_CHANNELS, text_dim=TEXT_DIM, freq_dim=32, ffn_dim=32, num_layers=2,
)  # fmt: skip
WIDTH, HEIGHT, FRAMES = 48, 32, 9  # latents [16, 3, 4, 6]
PROMPT, NEGATIVE, SEED = "a lighthouse", "blurry", 7
RELATIVE_TOLERANCE = 1e-4
pytestmark = pytest.mark.filterwarnings("ignore:CUDA is not available:UserWarning")  # the Wan code's autocast


def _official_model(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    model = official_wan().modules.model.WanModel(**WAN_MODEL).eval()
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.1 * torch.randn(parameter.shape, generator=generator))
    return model


def _text() -> dict[str, torch.Tensor]:
    """What the stand-in text encoder returns per prompt: [L, text_dim], L < text_len."""
    generator = torch.Generator().manual_seed(0)
    return {PROMPT: torch.randn(5, TEXT_DIM, generator=generator), NEGATIVE: torch.randn(3, TEXT_DIM, generator=generator)}


def _padded(context: torch.Tensor) -> np.ndarray:
    """[1, text_len, text_dim]: the context as WanModel pads it, as wanjax is given it."""
    padded = torch.cat([context, context.new_zeros(TEXT_LEN - context.size(0), TEXT_DIM)])
    return padded.numpy()[None]


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory):
    """Two official WanModels (high noise first) and wanjax denoisers over the first one and over
    both, their transformers loaded from the models' original-name files."""
    folder = tmp_path_factory.mktemp("official-wan-model")
    official, ours = [], []
    runtime = TransformerRuntime(dtype=jnp.float32, param_dtype=jnp.float32)
    for seed in (1, 2):
        model = _official_model(seed)
        path = folder / f"expert{seed}.safetensors"
        save_file({name: tensor.contiguous() for name, tensor in model.state_dict().items()}, str(path))
        official.append(model)
        ours.append(load_transformer(SPEC, runtime, transformer_weights(path)))
    return official, {1: JaxDenoiser(ours[:1]), 2: JaxDenoiser(ours)}  # each compiles its step once


def _official_latents(official, solver: str, steps: int, shift: float, boundary: float, guidance) -> np.ndarray:
    text = _text()
    pipeline = official_pipeline(
        "wan.text2video.WanT2V",
        high_noise_model=official[0], low_noise_model=official[-1], boundary=boundary, num_train_timesteps=1000,
        param_dtype=torch.float32, vae_stride=(4, 8, 8), patch_size=(1, 2, 2), sample_neg_prompt="",
        text_encoder=lambda texts, device: [text[t] for t in texts],
        vae=types.SimpleNamespace(model=types.SimpleNamespace(z_dim=LATENT_CHANNELS), decode=lambda latents: latents),
    )  # fmt: skip
    latents = pipeline.generate(
        PROMPT, size=(WIDTH, HEIGHT), frame_num=FRAMES, shift=shift, sample_solver=solver, sampling_steps=steps,
        guide_scale=guidance, n_prompt=NEGATIVE, seed=SEED, offload_model=False,
    )  # fmt: skip
    return latents.numpy()  # [C, F, H, W]


def _noise() -> np.ndarray:
    """generate's initial noise: torch.randn of the latent shape from a generator seeded with `seed`."""
    generator = torch.Generator().manual_seed(SEED)
    shape = (LATENT_CHANNELS, (FRAMES - 1) // 4 + 1, HEIGHT // 8, WIDTH // 8)
    return torch.randn(*shape, dtype=torch.float32, generator=generator).numpy()


def _wanjax_latents(denoisers, num_experts: int, request: GenerationRequest, boundary: float | None) -> np.ndarray:
    plan = plan_sampling(request, num_experts=num_experts, model_boundary_ratio=boundary)
    denoiser = denoisers[num_experts]
    latents = np.ascontiguousarray(_noise().transpose(1, 2, 3, 0)[None])  # [1, F, H, W, C]
    text = _text()
    context, negative = _padded(text[PROMPT]), _padded(text[NEGATIVE])
    session = denoiser.session(plan, context, negative)
    session.prepare(latents)
    final = np.asarray(session.denoise(latents).latents)
    return final[0].transpose(3, 0, 1, 2)  # [C, F, H, W]


def _request(solver: str, steps: int, shift: float, high: float, low: float | None, **extra) -> GenerationRequest:
    return GenerationRequest(
        prompt=PROMPT, negative_prompt=NEGATIVE, height=HEIGHT, width=WIDTH, num_frames=FRAMES,
        num_inference_steps=steps, guidance_scale=high, guidance_scale_low=low, flow_shift=shift,
        sample_solver=solver, seed=SEED, **extra,
    )  # fmt: skip


def _relative_error(got: np.ndarray, expected: np.ndarray) -> float:
    return float(np.max(np.abs(got - expected)) / np.max(np.abs(expected)))


@pytest.mark.parametrize(
    "solver, steps, shift", [("unipc", 4, 3.0), ("unipc", 10, 5.0), ("dpm++", 4, 3.0), ("dpm++", 10, 8.0)]
)
def test_one_expert_final_latents_are_the_official_loops(models, solver, steps, shift):
    official, denoisers = models
    expected = _official_latents(official[:1], solver, steps, shift, boundary=0.0, guidance=(5.0, 5.0))
    got = _wanjax_latents(denoisers, 1, _request(solver, steps, shift, 5.0, None), None)
    assert _relative_error(got, expected) <= RELATIVE_TOLERANCE


# 19 steps at shift 12 (Wan 2.2 T2V A14B's): the official grid runs the high-noise expert
# 12 steps, the diffusers grid 13.
@pytest.mark.parametrize("solver, steps, shift", [("unipc", 19, 12.0), ("dpm++", 19, 12.0), ("unipc", 6, 3.0)])
def test_two_experts_final_latents_are_the_official_loops(models, solver, steps, shift):
    official, denoisers = models
    expected = _official_latents(official, solver, steps, shift, boundary=0.875, guidance=(3.0, 4.0))
    got = _wanjax_latents(denoisers, 2, _request(solver, steps, shift, 4.0, 3.0), 0.875)
    assert _relative_error(got, expected) <= RELATIVE_TOLERANCE


def test_the_diffusers_grid_is_measurably_off_the_official_loop(models):
    """What the test above would see if wanjax still sampled on diffusers' grid."""
    official, denoisers = models
    expected = _official_latents(official, "unipc", 19, 12.0, boundary=0.875, guidance=(3.0, 4.0))
    got = _wanjax_latents(denoisers, 2, _request("unipc", 19, 12.0, 4.0, 3.0, sigma_schedule="diffusers"), 0.875)
    assert _relative_error(got, expected) > 1e-2
