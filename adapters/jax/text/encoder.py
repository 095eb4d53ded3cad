"""The `TextEncoder` port on the JAX UMT5 encoder: prompts cleaned and tokenized as diffusers'
Wan pipelines do, one compiled forward pass per batch size, rows zero past each prompt's tokens."""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np

from wanjax.adapters.checkpoints.checkpoint import EncoderFiles
from wanjax.adapters.checkpoints.original_t5 import umt5_config, umt5_tensors
from wanjax.adapters.checkpoints.weights import open_weights
from wanjax.adapters.jax.platform.dtypes import jax_dtype
from wanjax.adapters.jax.platform.residency import RESIDENT, Residency
from wanjax.adapters.jax.text.umt5 import Umt5Spec, encode, stack_weights
from wanjax.adapters.text.prompts import cleaned_prompts
from wanjax.adapters.text.tokenizer import FastTokenizer
from wanjax.domain.errors import CheckpointError


class JaxUmt5TextEncoder:
    """Implements the TextEncoder port; safe to call from several threads. With a `residency` off
    the device (`offload=components`) its weights wait in host memory and are on the device only
    while it encodes."""

    def __init__(
        self, tokenizer: FastTokenizer, spec: Umt5Spec, weights: dict[str, Any], residency: Residency = RESIDENT
    ) -> None:
        self._tokenizer = tokenizer
        self._residency = residency
        self._weights = residency.at_rest(weights)
        self._forward = jax.jit(functools.partial(encode, spec=spec))

    @classmethod
    def from_files(
        cls, files: EncoderFiles, *, dtype: str = "bfloat16", residency: Residency = RESIDENT
    ) -> JaxUmt5TextEncoder:
        """From a diffusers-format `text_encoder/` folder (its config.json and safetensors) or one
        weights file in the official or transformers' names, and the `tokenizer/` folder."""
        if files.preprocessing is None:
            raise CheckpointError("the UMT5 text encoder needs its tokenizer folder")
        tokenizer = FastTokenizer(files.preprocessing)
        where = str(files.weights)
        tensors = umt5_tensors(open_weights(files.weights), where)
        config_file = files.weights / "config.json"
        config = json.loads(config_file.read_text()) if config_file.is_file() else umt5_config(tensors, where)
        spec = Umt5Spec.from_config(config)
        return cls(tokenizer, spec, stack_weights(tensors, spec.num_layers, jax_dtype(dtype)), residency)

    def encode(self, prompts: Sequence[str], max_sequence_length: int) -> np.ndarray:
        """Embeddings [B, L, D] float32 with L = `max_sequence_length`; longer prompts are truncated."""
        ids, mask = self._tokenizer(cleaned_prompts(prompts, max_sequence_length), max_sequence_length)
        hidden = np.asarray(self._forward(self._residency.working(self._weights), ids, mask), np.float32)
        # Trim by length, as diffusers does (not by mask), so any padding side matches it.
        keep = np.arange(max_sequence_length)[None, :] < mask.sum(axis=1)[:, None]  # [B, L]
        return np.where(keep[:, :, None], hidden, np.float32(0))
