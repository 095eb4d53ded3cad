"""A tiny character-level tokenizer for the built-in demo model and for tests.

The real Wan checkpoints ship the umt5-xxl sentencepiece tokenizer (250k pieces), which
would need a download. This one is built from code, offline, and saved in the same
on-disk form (`tokenizer.json` + `tokenizer_config.json`) so `AutoTokenizer` loads it
exactly as it loads the real one. Its ids follow T5: `<pad>` 0, `</s>` 1, `<unk>` 2,
and `</s>` is appended to every sequence.
"""

from __future__ import annotations

from pathlib import Path

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors
from transformers import PreTrainedTokenizerFast

SPECIAL_TOKENS = ("<pad>", "</s>", "<unk>")
PRINTABLE_ASCII = tuple(chr(code) for code in range(32, 127))
DEMO_VOCAB_SIZE = len(SPECIAL_TOKENS) + len(PRINTABLE_ASCII)


def write_demo_tokenizer(path: Path) -> int:
    """Writes the demo tokenizer into folder `path` (created if needed); returns its vocab size.

    One token per printable ASCII character (space included); any other character
    becomes `<unk>`. The files are byte-identical on every call.
    """
    vocab = {token: index for index, token in enumerate(SPECIAL_TOKENS + PRINTABLE_ASCII)}
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    backend.post_processor = processors.TemplateProcessing(
        single="$A </s>", pair="$A </s> $B </s>", special_tokens=[("</s>", vocab["</s>"])]
    )
    backend.decoder = decoders.Fuse()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, pad_token="<pad>", eos_token="</s>", unk_token="<unk>"
    )
    path.mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(path)
    return len(vocab)
