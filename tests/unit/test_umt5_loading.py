"""Loading errors and prompt cleaning of the torch UMT5 adapter (no model weights needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from wanjax.adapters.text.prompts import clean_prompt
from wanjax.adapters.torch.umt5 import Umt5TextEncoder
from wanjax.domain.errors import CheckpointError, ConfigError


def test_missing_text_encoder_folder_is_named(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="text encoder folder not found: .*text_encoder"):
        Umt5TextEncoder.from_folders(tmp_path / "text_encoder", tmp_path / "tokenizer", dtype="float32")


def test_missing_tokenizer_folder_is_named(tmp_path: Path) -> None:
    (tmp_path / "text_encoder").mkdir()
    with pytest.raises(CheckpointError, match="tokenizer folder not found: .*tokenizer"):
        Umt5TextEncoder.from_folders(tmp_path / "text_encoder", tmp_path / "tokenizer", dtype="float32")


def test_empty_tokenizer_folder_is_a_checkpoint_error(tmp_path: Path) -> None:
    (tmp_path / "text_encoder").mkdir()
    (tmp_path / "tokenizer").mkdir()
    with pytest.raises(CheckpointError, match="cannot load the tokenizer"):
        Umt5TextEncoder.from_folders(tmp_path / "text_encoder", tmp_path / "tokenizer", dtype="float32")


def test_unknown_dtype_lists_the_allowed_ones(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="bfloat16.*float32"):
        Umt5TextEncoder.from_folders(tmp_path, tmp_path, dtype="float16")


@pytest.mark.parametrize(
    "raw",
    [
        "  a \n\t b  ",
        "&amp;amp; &lt;x&gt;",
        "a\u3000b",  # ideographic space is whitespace
        "a \x1c b",  # not whitespace to `regex` (diffusers), unlike `re`
        "",
    ],
)
def test_clean_prompt_matches_diffusers_rules(raw: str) -> None:
    from diffusers.pipelines.wan.pipeline_wan import prompt_clean

    clean = prompt_clean(raw)
    assert clean_prompt(raw) == clean
