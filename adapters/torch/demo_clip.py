"""A tiny random CLIP vision encoder and its image processor, in the diffusers `image_encoder/`
and `image_processor/` layout, for the demo model and tests.

Same architecture as Wan 2.1 I2V's CLIP ViT-H/14 (pre-norm ViT, exact GELU, class token)
at toy sizes, so the real loading and encoding paths run in seconds without a download:
image_size 32 and patch 8 give 4 * 4 + 1 = 17 tokens where ViT-H/14 at 224 gives 257.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from transformers import CLIPVisionConfig, CLIPVisionModel

from wanjax.adapters.torch.clip_image import wan_clip_preprocessing


def write_demo_image_encoder(
    path: Path,
    *,
    seed: int,
    hidden_size: int = 32,
    num_layers: int = 2,
    image_size: int = 32,
    patch_size: int = 8,
) -> None:
    """Writes `config.json` + `model.safetensors` of a seeded random CLIP vision encoder into `path`.

    The same arguments give the same weights; the caller's torch RNG state is left untouched.
    """
    config = CLIPVisionConfig(
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        projection_dim=hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=2,
        image_size=image_size,
        patch_size=patch_size,
        hidden_act="gelu",
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = CLIPVisionModel(config).eval()
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path)


def write_demo_image_processor(path: Path, *, image_size: int = 32) -> None:
    """Writes `preprocessor_config.json`: the CLIP preprocessing Wan ships (bicubic resize of
    the short side, center crop, rescale, OpenAI CLIP mean/std) at `image_size`."""
    config = wan_clip_preprocessing(image_size)
    path.mkdir(parents=True, exist_ok=True)
    (path / "preprocessor_config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
