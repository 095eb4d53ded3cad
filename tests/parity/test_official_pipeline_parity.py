"""The Wan code's own pipelines, whole, against `wanjax generate --model OFFICIAL_FOLDER`.

The official `WanT2V` and `WanI2V` (Wan 2.2 A14B: two experts) and `WanTI2V` (TI2V-5B, its
text-to-video mode) run on the CPU with the tiny official modules a folder was written from
(tests/official_folders.py): their T5 encoder and tokenizer, their VAE (2.1 or 2.2), their
WanModels, their UniPC loop on the official noise grid.
wanjax reads the folder (sigma_schedule=official, its default) and starts from the same
noise (generate's `torch.randn` from its seed). The image of I2V is given at the video size,
where both sides' resizing is the identity.

Frames are compared as uint8, round((x + 1) / 2 * 255), within 1 level: both run in fp32
and differ by summation order (transformer passes ~1e-6 apart, the VAE ~5e-6).
"""

from __future__ import annotations

import types

import numpy as np
import pytest
import torch
from PIL import Image

from official_folders import TEXT_LEN, official_models, write_official_folder
from official_wan import official_pipeline

from wanjax.adapters.checkpoints.official_folder import BOUNDARY_RATIO, TOKENIZER_FOLDER
from wanjax.application.container import build_container
from wanjax.application.presets import resolve_config

pytestmark = pytest.mark.filterwarnings("ignore:.*CUDA is not available:UserWarning")  # the Wan code's autocast
HEIGHT, WIDTH, FRAMES, STEPS, SHIFT, SEED = 32, 64, 5, 6, 5.0, 7  # TI2V: multiples of 32
PROMPT, NEGATIVE = "a lighthouse", "blurry"
GUIDANCE = {"high": 4.0, "low": 3.0}


def _official_text_encoder(models, folder):
    """The official T5EncoderModel around the tiny encoder (its __init__ would build umt5-xxl)."""
    from wan.modules.t5 import T5EncoderModel
    from wan.modules.tokenizers import HuggingfaceTokenizer

    encoder = object.__new__(T5EncoderModel)
    encoder.text_len, encoder.dtype, encoder.device = TEXT_LEN, torch.float32, torch.device("cpu")
    encoder.model = models.t5
    encoder.tokenizer = HuggingfaceTokenizer(name=str(folder / TOKENIZER_FOLDER), seq_len=TEXT_LEN, clean="whitespace")
    return encoder


def _official_vae(models):
    """The official Wan2_1_VAE / Wan2_2_VAE around the tiny WanVAE_ (their __init__ loads the
    released size), with the released latent statistics."""
    from wan.modules.vae2_1 import Wan2_1_VAE
    from wan.modules.vae2_2 import Wan2_2_VAE

    from wanjax.adapters.checkpoints.original_vae import LATENT_STATISTICS

    vae = object.__new__(Wan2_2_VAE if models.kind.vae22 else Wan2_1_VAE)
    vae.dtype, vae.device, vae.model = torch.float32, torch.device("cpu"), models.vae
    vae.mean, vae.std = (torch.tensor(values) for values in LATENT_STATISTICS[models.vae.z_dim])
    vae.scale = [vae.mean, 1.0 / vae.std]
    return vae


def _noise(z_dim: int, compression: int) -> np.ndarray:
    """generate's initial noise: torch.randn of the latent shape from a generator seeded with SEED."""
    shape = (z_dim, (FRAMES - 1) // 4 + 1, HEIGHT // compression, WIDTH // compression)
    return torch.randn(*shape, dtype=torch.float32, generator=torch.Generator().manual_seed(SEED)).numpy()


def _to_uint8(video: torch.Tensor) -> np.ndarray:
    """[3, F, H, W] in [-1, 1] -> [F, H, W, 3] uint8 as wanjax quantises."""
    return np.round(((video.clamp(-1, 1) + 1) / 2 * 255).numpy()).astype(np.uint8).transpose(1, 2, 3, 0)


PIPELINES = {
    "t2v-a14b": "wan.text2video.WanT2V", "i2v-a14b": "wan.image2video.WanI2V", "ti2v": "wan.textimage2video.WanTI2V",
}  # fmt: skip


@pytest.mark.parametrize("kind", list(PIPELINES))
def test_frames_are_the_official_pipelines(kind, tmp_path) -> None:
    models = official_models(kind)
    folder = write_official_folder(tmp_path / kind, models)
    image = np.random.default_rng(0).integers(0, 256, (HEIGHT, WIDTH, 3), dtype=np.uint8) if "i2v-" in kind else None
    compression = 16 if models.kind.vae22 else 8
    if len(models.experts) == 2:
        experts = dict(high_noise_model=models.experts[0], low_noise_model=models.experts[1])
        experts.update(boundary=BOUNDARY_RATIO[models.kind.model_type])
        guidance = dict(guidance_scale=GUIDANCE["high"], guidance_scale_low=GUIDANCE["low"])
        official_guidance = (GUIDANCE["low"], GUIDANCE["high"])
    else:
        experts, official_guidance = dict(model=models.experts[0]), GUIDANCE["high"]
        guidance = dict(guidance_scale=GUIDANCE["high"])

    official = official_pipeline(
        PIPELINES[kind], **experts, num_train_timesteps=1000, param_dtype=torch.float32,
        vae_stride=(4, compression, compression), patch_size=(1, 2, 2), sample_neg_prompt="",
        text_encoder=_official_text_encoder(models, folder), vae=_official_vae(models),
    )  # fmt: skip
    size = {"size": (WIDTH, HEIGHT)} if image is None else {"img": Image.fromarray(image), "max_area": HEIGHT * WIDTH}
    with torch.no_grad():
        video = official.generate(
            PROMPT, **size, frame_num=FRAMES, shift=SHIFT, sample_solver="unipc", sampling_steps=STEPS,
            guide_scale=official_guidance, n_prompt=NEGATIVE, seed=SEED, offload_model=False,
        )  # fmt: skip

    config = resolve_config(str(folder), {"max_sequence_length": str(TEXT_LEN), "text_embeddings_cache_dir": "none"})
    request = config.request(
        PROMPT, negative_prompt=NEGATIVE, height=HEIGHT, width=WIDTH, num_frames=FRAMES, num_inference_steps=STEPS,
        flow_shift=SHIFT, sample_solver="unipc", seed=SEED, image=image, **guidance,
    )  # fmt: skip
    noise = _noise(models.vae.z_dim, compression)[None]
    ours = build_container(config).service().generate(request, initial_latents=noise).array[0]

    expected = _to_uint8(video)
    assert ours.shape == expected.shape and np.ptp(expected) > 0
    assert np.abs(ours.astype(int) - expected).max() <= 1
