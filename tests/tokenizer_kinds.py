"""The tokenizer folders a UMT5-style (T5-family) text encoder comes with, each as transformers
writes it, tiny and built offline.

- `tokenizer.json`: a `tokenizers` serialization (transformers 5 saves every T5 tokenizer so;
  here the demo's character-level one);
- `spiece.model`: a sentencepiece model with its tokenizer_config.json and
  special_tokens_map.json, as transformers 4's T5Tokenizer saved it and google/umt5-xxl ships it
  (transformers 5 would save it as tokenizer.json, so it is written here the way 4 wrote it);
- `byt5`: a ByT5Tokenizer's `save_pretrained` (bytes need no vocabulary file: tokenizer_config.json
  and added_tokens.json only).
"""

from __future__ import annotations

import io
import json
from pathlib import Path

TOKENIZER_KINDS = ("tokenizer.json", "spiece.model", "byt5")
_SPECIAL = {"pad_token": "<pad>", "eos_token": "</s>", "unk_token": "<unk>"}
_TEXT = ["a fox jumps over the lazy dog", "the quick brown fox", "a cat sat on a mat", "a hare in the snow"] * 50


def write_tokenizer(folder: Path, kind: str) -> None:
    """Writes a tokenizer of `kind` (one of TOKENIZER_KINDS) into `folder`."""
    folder = Path(folder)
    if kind == "tokenizer.json":
        from wanjax.adapters.torch.demo_tokenizer import write_demo_tokenizer

        write_demo_tokenizer(folder)
    elif kind == "spiece.model":
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "spiece.model").write_bytes(_sentencepiece_model())
        config = {"tokenizer_class": "T5Tokenizer", "extra_ids": 0, "additional_special_tokens": [], **_SPECIAL}
        (folder / "tokenizer_config.json").write_text(json.dumps(config))
        (folder / "special_tokens_map.json").write_text(json.dumps(_SPECIAL))
    elif kind == "byt5":
        from transformers import ByT5Tokenizer

        ByT5Tokenizer().save_pretrained(folder)
    else:
        raise ValueError(f"unknown tokenizer kind {kind!r}")


def _sentencepiece_model() -> bytes:
    """A 40-piece unigram model with T5's ids: <pad> 0, </s> 1, <unk> 2."""
    import sentencepiece

    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(_TEXT), model_writer=model, vocab_size=40, model_type="unigram",
        pad_id=0, eos_id=1, unk_id=2, bos_id=-1, character_coverage=1.0, hard_vocab_limit=False,
        num_threads=1, minloglevel=2,
    )  # fmt: skip
    return model.getvalue()
