"""The `TextEncoder` port on transformers' UMT5 encoder, numerically equal to diffusers' Wan pipelines.

Mirrors `WanPipeline._get_t5_prompt_embeds` (diffusers 0.35+): the same prompt
cleaning, tokenizer call and trimming, so the same weights give the same embeddings
bit for bit. This is the only module that imports torch for text encoding; the
composition root imports it lazily so JAX-only runs never load torch.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from transformers import AutoTokenizer, PreTrainedTokenizerBase, UMT5Config, UMT5EncoderModel

from wanjax.adapters.checkpoints.checkpoint import EncoderFiles
from wanjax.adapters.checkpoints.original_t5 import umt5_config, umt5_tensors
from wanjax.adapters.checkpoints.weights import open_weights
from wanjax.adapters.text.prompts import cleaned_prompts
from wanjax.adapters.torch.pretrained import load_pretrained, model_from_tensors, require_folders, torch_dtype


class Umt5TextEncoder:
    """Encodes a batch of prompts in one forward pass; rows are zero past each prompt's tokens.

    With `compile`, the forward pass runs through `torch.compile` (inductor): each new batch
    size compiles once (seconds on the tiny encoder, minutes on UMT5-XXL), then runs fused.
    """

    def __init__(self, tokenizer: PreTrainedTokenizerBase, model: UMT5EncoderModel, *, compile: bool = False) -> None:
        self._tokenizer = tokenizer
        self._model = model.eval()
        self._forward = torch.compile(self._model, dynamic=False) if compile else self._model
        # One encode at a time: a fast tokenizer sets its padding and truncation on the shared Rust
        # object for each call ("Already borrowed" when threads overlap), and torch already spreads
        # one forward pass over every core.
        self._encoding = threading.Lock()

    @classmethod
    def from_folders(
        cls,
        text_encoder_dir: Path,
        tokenizer_dir: Path,
        *,
        dtype: str = "bfloat16",
        device: str = "cpu",
        compile: bool = False,
    ) -> Umt5TextEncoder:
        """Loads a diffusers-format `text_encoder/` and `tokenizer/` pair, offline.

        `dtype` is "float32" or "bfloat16"; `device` is a torch device name such as "cpu";
        `compile` (config `compile_text_encoder`) wraps the forward pass in torch.compile.
        """
        weights_dtype = torch_dtype(dtype, "text encoder")
        require_folders({"UMT5 text encoder": text_encoder_dir, "tokenizer": tokenizer_dir})
        tokenizer = load_pretrained(AutoTokenizer.from_pretrained, tokenizer_dir, "tokenizer")
        model = load_pretrained(UMT5EncoderModel.from_pretrained, text_encoder_dir, "UMT5 text encoder", dtype=weights_dtype)
        return cls(tokenizer, model.to(torch.device(device)), compile=compile)

    @classmethod
    def from_files(
        cls, files: EncoderFiles, *, dtype: str = "bfloat16", device: str = "cpu", compile: bool = False
    ) -> Umt5TextEncoder:
        """Loads the encoder from `files`: a diffusers-format `text_encoder/` folder, or one weights
        file (the official `models_t5_umt5-xxl-enc-bf16.pth`, or a `.safetensors` in the official
        or transformers' names) whose architecture is read from its shapes; and the tokenizer folder."""
        if files.weights.is_dir():
            return cls.from_folders(files.weights, files.preprocessing, dtype=dtype, device=device, compile=compile)
        weights_dtype = torch_dtype(dtype, "text encoder")
        require_folders({"tokenizer": files.preprocessing})
        where = str(files.weights)
        tensors = umt5_tensors(open_weights(files.weights), where)
        config = UMT5Config(**umt5_config(tensors, where))
        model = model_from_tensors(UMT5EncoderModel, config, tensors, "UMT5 text encoder", files.weights, weights_dtype)
        tokenizer = load_pretrained(AutoTokenizer.from_pretrained, files.preprocessing, "tokenizer")
        return cls(tokenizer, model.to(torch.device(device)), compile=compile)

    def encode(self, prompts: Sequence[str], max_sequence_length: int) -> np.ndarray:
        """Embeddings [B, L, D] float32 with L = `max_sequence_length`; longer prompts are truncated."""
        cleaned = cleaned_prompts(prompts, max_sequence_length)
        with self._encoding:
            return self._encode(cleaned, max_sequence_length)

    def _encode(self, prompts: list[str], max_sequence_length: int) -> np.ndarray:
        tokens = self._tokenizer(
            prompts,
            padding="max_length",
            max_length=max_sequence_length,
            truncation=True,
            add_special_tokens=True,
            return_attention_mask=True,
            return_tensors="pt",
        )
        device = self._model.device
        with torch.inference_mode():
            hidden = self._forward(
                input_ids=tokens.input_ids.to(device), attention_mask=tokens.attention_mask.to(device)
            ).last_hidden_state  # [B, L, D]
            lengths = tokens.attention_mask.gt(0).sum(dim=1)  # [B]
            # Trim by length, as diffusers does (not by mask), so any padding side matches it.
            keep = torch.arange(max_sequence_length)[None, :] < lengths[:, None]  # [B, L]
            hidden = hidden.masked_fill(~keep[:, :, None].to(device), 0)
            return hidden.float().cpu().numpy()

