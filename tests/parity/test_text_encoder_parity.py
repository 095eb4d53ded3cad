"""The torch UMT5 adapter against diffusers' WanPipeline prompt encoding, on the demo tokenizer
and a tiny random UMT5 saved in the diffusers layout."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from diffusers import WanPipeline
from transformers import AutoTokenizer, UMT5EncoderModel

from wanjax.adapters.torch.demo_tokenizer import SPECIAL_TOKENS, write_demo_tokenizer
from wanjax.adapters.demo.random_checkpoint import demo_umt5_sizes, write_random_text_encoder
from wanjax.adapters.torch.umt5 import Umt5TextEncoder
from wanjax.domain.errors import InvalidRequestError

PROMPTS = [
    "A cat  and a dog &amp;amp; baking\n a cake\t",  # whitespace runs, double-escaped entity
    "",
    "a long prompt that the tokenizer truncates " * 20,  # ~860 characters: truncated at 16 and at 512
    "naïve café \x1c ok",  # non-ASCII (<unk>); U+001C is whitespace to `re`, not to `regex`
    "short",
]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("demo_text")
    vocab_size = write_demo_tokenizer(root / "tokenizer")
    write_random_text_encoder(root / "text_encoder", demo_umt5_sizes(vocab_size), seed=0)
    return root


def reference_pipeline(checkpoint: Path, dtype: torch.dtype) -> WanPipeline:
    """WanPipeline with only the text components (diffusers allows vae/scheduler None)."""
    return WanPipeline(
        tokenizer=AutoTokenizer.from_pretrained(checkpoint / "tokenizer"),
        text_encoder=UMT5EncoderModel.from_pretrained(checkpoint / "text_encoder", dtype=dtype),
        vae=None,
        scheduler=None,
    )


def reference_embeddings(pipe: WanPipeline, prompts: list[str], max_sequence_length: int) -> np.ndarray:
    with torch.no_grad():
        embeds = pipe._get_t5_prompt_embeds(
            prompt=prompts, max_sequence_length=max_sequence_length, device=torch.device("cpu")
        )
    return embeds.float().numpy()


def load_ours(checkpoint: Path, dtype: str) -> Umt5TextEncoder:
    return Umt5TextEncoder.from_folders(checkpoint / "text_encoder", checkpoint / "tokenizer", dtype=dtype)


@pytest.mark.parametrize("max_sequence_length", [16, 512])
def test_float32_equals_diffusers_exactly(checkpoint: Path, max_sequence_length: int) -> None:
    pipe = reference_pipeline(checkpoint, torch.float32)
    expected = reference_embeddings(pipe, PROMPTS, max_sequence_length)
    got = load_ours(checkpoint, "float32").encode(PROMPTS, max_sequence_length)
    assert got.dtype == np.float32
    assert got.shape == (len(PROMPTS), max_sequence_length, 32)
    np.testing.assert_array_equal(got, expected)
    assert np.all(got[1, 1:] == 0) and np.any(got[1, 0] != 0)  # "" is one </s> token


def test_batched_call_matches_encode_prompt_of_positive_and_negative(checkpoint: Path) -> None:
    """The caller batches [prompt, negative]; diffusers' encode_prompt runs them separately.
    Batch size changes the CPU kernels' reduction order, hence a float32-rounding tolerance."""
    pipe = reference_pipeline(checkpoint, torch.float32)
    with torch.no_grad():
        positive, negative = pipe.encode_prompt(
            PROMPTS[0], PROMPTS[2], max_sequence_length=64, device=torch.device("cpu")
        )
    got = load_ours(checkpoint, "float32").encode([PROMPTS[0], PROMPTS[2]], 64)
    np.testing.assert_allclose(got, torch.cat([positive, negative]).numpy(), rtol=0, atol=1e-6)


def test_bfloat16_equals_diffusers_and_is_close_to_float32(checkpoint: Path) -> None:
    expected = reference_embeddings(reference_pipeline(checkpoint, torch.bfloat16), PROMPTS, 512)
    got = load_ours(checkpoint, "bfloat16").encode(PROMPTS, 512)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, expected)
    # Measured max |bf16 - fp32| = 0.031 at |values| <= 3.2 (2 layers, bf16 eps 2^-8).
    float32 = load_ours(checkpoint, "float32").encode(PROMPTS, 512)
    np.testing.assert_allclose(got, float32, rtol=0.02, atol=0.06)
    np.testing.assert_array_equal(np.all(got == 0, axis=-1), np.all(float32 == 0, axis=-1))  # padded rows


@pytest.mark.parametrize(
    ("prompts", "max_sequence_length"), [("one string", 16), ([], 16), (["fine"], 0)]
)
def test_encode_rejects_bad_input(checkpoint: Path, prompts: object, max_sequence_length: int) -> None:
    with pytest.raises(InvalidRequestError):
        load_ours(checkpoint, "float32").encode(prompts, max_sequence_length)  # type: ignore[arg-type]


def test_demo_tokenizer_round_trips_offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    vocab_size = write_demo_tokenizer(tmp_path)
    tokenizer = AutoTokenizer.from_pretrained(tmp_path, local_files_only=True)
    assert len(tokenizer) == vocab_size == len(SPECIAL_TOKENS) + 95
    assert (tokenizer.pad_token_id, tokenizer.eos_token_id, tokenizer.unk_token_id) == (0, 1, 2)
    ids = tokenizer("Hi, you!").input_ids
    assert len(ids) == len("Hi, you!") + 1 and ids[-1] == tokenizer.eos_token_id
    assert tokenizer.decode(ids, skip_special_tokens=True) == "Hi, you!"
    assert tokenizer("é").input_ids == [tokenizer.unk_token_id, tokenizer.eos_token_id]


def test_demo_files_are_byte_identical_on_rewrite(tmp_path: Path) -> None:
    for run in ("a", "b"):
        vocab_size = write_demo_tokenizer(tmp_path / run / "tokenizer")
        write_random_text_encoder(tmp_path / run / "text_encoder", demo_umt5_sizes(vocab_size), seed=0)
    files = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(tmp_path / "b") for p in (tmp_path / "b").rglob("*") if p.is_file())
    assert len(files) >= 4
    for name in files:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name

