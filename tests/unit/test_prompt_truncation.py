"""A prompt that fills every text token was cut: the run says so instead of dropping it silently."""

import logging

import numpy as np

from wanjax.application.prompts import encode_prompts
from wanjax.domain.config import GenerationConfig

TOKENS = 8


class WordEncoder:
    """One embedding row per word, zero rows after the text, cut at the token budget."""

    def encode(self, prompts, max_sequence_length):
        rows = np.zeros((len(prompts), max_sequence_length, 4), np.float32)
        for i, prompt in enumerate(prompts):
            rows[i, : min(len(prompt.split()), max_sequence_length)] = 1.0
        return rows


def test_only_a_prompt_that_fills_every_token_is_reported(caplog):
    config = GenerationConfig.from_mapping(dict(height=32, width=48, num_frames=5, num_inference_steps=2, max_sequence_length=TOKENS))
    requests = [config.request(" ".join(["fox"] * 100), negative_prompt="blurry"), config.request("a short one")]
    with caplog.at_level(logging.WARNING):
        encode_prompts(WordEncoder(), requests, TOKENS, batched=True)
    assert [r.getMessage() for r in caplog.records] == [
        f"wanjax: warning: the prompt '{('fox ' * 15)[:57]}...' fills all {TOKENS} text tokens (max_sequence_length); "
        "the rest of it was cut and has no effect"
    ]
