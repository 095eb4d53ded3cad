"""Whether transformers' `AutoTokenizer` can build the tokenizer of a folder, checked before any
weights load and as cheaply as it can be: a folder with a tokenizer.json or a sentencepiece
spiece.model passes on sight (a corrupt one is still named when it loads); any other folder is
handed to `AutoTokenizer` itself, which accepts what it can build without a vocabulary file (a
ByT5 tokenizer saved by `save_pretrained`: tokenizer_config.json and added_tokens.json) and is
quick at it, having no vocabulary to read."""

from __future__ import annotations

from pathlib import Path

from wanjax.domain.errors import CheckpointError

VOCABULARY_FILES = ("tokenizer.json", "spiece.model")
"""What transformers builds a UMT5 (T5) tokenizer from."""


def check_auto_tokenizer(folder: Path) -> None:
    """CheckpointError, naming the folder, unless `AutoTokenizer` can build its tokenizer."""
    folder = Path(folder)
    if any((folder / name).is_file() for name in VOCABULARY_FILES):
        return
    from transformers import AutoTokenizer

    from wanjax.adapters.torch.pretrained import load_pretrained

    try:
        load_pretrained(AutoTokenizer.from_pretrained, folder, "tokenizer")
    except CheckpointError as err:
        raise CheckpointError(
            f"{err}\nIt has none of {', '.join(VOCABULARY_FILES)}, and transformers builds no tokenizer from what "
            "it has; re-download the checkpoint"
        ) from None
