"""The tokenizer of a diffusers-format `tokenizer/` folder through the `tokenizers` library alone
(no transformers, no torch), called as the Wan pipelines call transformers' fast tokenizer:
special tokens added, truncated and padded to `max_length` on the sides its config names.

transformers (5.x) takes tokenizer.json as written, except for classes that rebuild their
pipeline: a `T5Tokenizer` folder (Wan's umt5-xxl) keeps the file's vocabulary, normalizer and
post-processor but splits on whitespace before its Metaspace pre-tokenizer; so does this."""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer, pre_tokenizers

from wanjax.domain.errors import CheckpointError


T5_CLASSES = ("T5Tokenizer", "T5TokenizerFast")


def require_tokenizer_json(folder: Path) -> None:
    """CheckpointError unless `folder` has the tokenizer.json this tokenizer reads (transformers also
    builds tokenizers from a sentencepiece spiece.model, or from no file at all for ByT5)."""
    if not (Path(folder) / "tokenizer.json").is_file():
        present = ", ".join(sorted(p.name for p in Path(folder).iterdir())) if Path(folder).is_dir() else "no folder"
        raise CheckpointError(
            f"{folder} has no tokenizer.json (it holds: {present or 'nothing'}), which the JAX text encoder "
            "reads; use --set text_encoder_backend=torch, whose transformers tokenizer builds from other files"
        )


class FastTokenizer:
    """Prompts -> (token ids, attention mask), each [B, max_length] int32."""

    def __init__(self, folder: Path) -> None:
        folder = Path(folder)
        require_tokenizer_json(folder)
        model = folder / "tokenizer.json"
        config_file = folder / "tokenizer_config.json"
        config = json.loads(config_file.read_text()) if config_file.is_file() else {}
        self._tokenizer = Tokenizer.from_file(str(model))
        if config.get("tokenizer_class") in T5_CLASSES:
            self._tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
                [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Metaspace("▁", "always", split=True)]
            )
        self._pad_token = config.get("pad_token", "<pad>")
        self._pad_id = self._tokenizer.token_to_id(self._pad_token)
        if self._pad_id is None:
            raise CheckpointError(f"{model}: the pad token {self._pad_token!r} is not in the vocabulary")
        self._padding_side = config.get("padding_side", "right")
        self._truncation_side = config.get("truncation_side", "right")
        # Truncation and padding are settings of the shared Rust object: one call at a time.
        self._calling = threading.Lock()

    def __call__(self, prompts: Sequence[str], max_length: int) -> tuple[np.ndarray, np.ndarray]:
        with self._calling:
            self._tokenizer.enable_truncation(max_length, direction=self._truncation_side)
            self._tokenizer.enable_padding(
                direction=self._padding_side, pad_id=self._pad_id, pad_token=self._pad_token, length=max_length
            )
            encodings = self._tokenizer.encode_batch(list(prompts), add_special_tokens=True)
        ids = np.array([encoding.ids for encoding in encodings], np.int32)
        mask = np.array([encoding.attention_mask for encoding in encodings], np.int32)
        return ids, mask
