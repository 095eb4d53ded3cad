"""A tiny random UMT5 encoder in the diffusers `text_encoder/` layout, for the demo model and tests.

Same architecture family as Wan's umt5-xxl encoder (gated-GELU feed-forward, per-layer
relative position buckets) at toy sizes, so the real loading and
encoding code paths run in seconds without a download.
"""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import UMT5Config, UMT5EncoderModel


def write_demo_text_encoder(
    path: Path, *, vocab_size: int, seed: int, d_model: int = 32, num_layers: int = 2
) -> None:
    """Writes `config.json` + `model.safetensors` of a seeded random UMT5 encoder into `path`.

    `vocab_size` must match the tokenizer's (see `write_demo_tokenizer`). The same
    arguments give the same weights; the caller's torch RNG state is left untouched.
    """
    config = UMT5Config(
        vocab_size=vocab_size,
        d_model=d_model,
        d_kv=16,
        d_ff=2 * d_model,
        num_layers=num_layers,
        num_heads=2,
        relative_attention_num_buckets=8,
        relative_attention_max_distance=32,
        feed_forward_proj="gated-gelu",
        dropout_rate=0.0,
        pad_token_id=0,
        eos_token_id=1,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = UMT5EncoderModel(config).eval()
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path)
