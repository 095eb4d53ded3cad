"""Tiny random SkyReels-V2 Diffusion Forcing pipelines written by diffusers' own `save_pretrained`:
the tiny Wan parts (tests/tiny_wan.py) around a `SkyReelsV2Transformer3DModel` with its fps embedding."""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch

from tiny_wan import TEXT_DIM, TINY_TRANSFORMER, TINY_VAE
from tokenizer_kinds import write_tokenizer
from wanjax.adapters.demo.random_checkpoint import demo_umt5_sizes, write_random_text_encoder

FLOW_SHIFT = 8.0  # SkyReels-V2 DF's scheduler config


def tiny_skyreels_df_pipeline(seed: int = 0):
    """A diffusers SkyReelsV2DiffusionForcingPipeline with seeded random weights (UniPC flow scheduler)."""
    from diffusers import (
        AutoencoderKLWan,
        SkyReelsV2DiffusionForcingPipeline,
        SkyReelsV2Transformer3DModel,
        UniPCMultistepScheduler,
    )
    from transformers import AutoTokenizer, UMT5EncoderModel

    with tempfile.TemporaryDirectory() as scratch:
        write_tokenizer(Path(scratch) / "tokenizer", "tokenizer.json")
        tokenizer = AutoTokenizer.from_pretrained(Path(scratch) / "tokenizer")
        write_random_text_encoder(Path(scratch) / "text_encoder", demo_umt5_sizes(len(tokenizer), TEXT_DIM), seed=seed)
        text_encoder = UMT5EncoderModel.from_pretrained(Path(scratch) / "text_encoder")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        transformer = SkyReelsV2Transformer3DModel(**TINY_TRANSFORMER, inject_sample_info=True)
        for parameter in (transformer.fps_embedding.weight, *transformer.fps_projection.parameters()):
            torch.nn.init.normal_(parameter, std=0.5)  # visible in the output: diffusers starts some at zero
        vae = AutoencoderKLWan(**TINY_VAE)
    scheduler = UniPCMultistepScheduler(prediction_type="flow_prediction", use_flow_sigmas=True, flow_shift=FLOW_SHIFT)
    pipe = SkyReelsV2DiffusionForcingPipeline(
        tokenizer=tokenizer, text_encoder=text_encoder, transformer=transformer, vae=vae, scheduler=scheduler
    )
    pipe.set_progress_bar_config(disable=True)
    return pipe
