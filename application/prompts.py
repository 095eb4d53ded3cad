"""Prompt encoding for a batch: the conditional and unconditional text embeddings the denoiser stacks."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np

from wanjax.domain.ports import TextEncoder
from wanjax.domain.requests import GenerationRequest

log = logging.getLogger(__name__)


def encode_prompts(
    encoder: TextEncoder,
    requests: Sequence[GenerationRequest],
    max_sequence_length: int,
    *,
    batched: bool,
) -> tuple[np.ndarray, np.ndarray | None]:
    """Embeddings [B, L, D] of the prompts and, with guidance, [B, L, D] of the negative prompts.

    `batched` (config `use_batched_text_encoder`): both kinds in one encoder call, else one
    call each. Each distinct text is encoded once (B videos usually share a negative prompt).
    """
    groups = _groups(requests, batched=batched)
    embeddings = np.concatenate([_encode_distinct(encoder, texts, max_sequence_length) for texts in groups])
    b = len(requests)
    return embeddings[:b], (embeddings[b:] if requests[0].uses_guidance else None)


def encoder_batches(requests: Sequence[GenerationRequest], *, batched: bool) -> list[list[str]]:
    """The prompt lists `encode_prompts` passes to the encoder, one per call, in order."""
    return [list(dict.fromkeys(texts)) for texts in _groups(requests, batched=batched)]


def _groups(requests: Sequence[GenerationRequest], *, batched: bool) -> list[list[str]]:
    prompts = [r.prompt for r in requests]
    negatives = [r.negative_prompt for r in requests] if requests[0].uses_guidance else []
    return [prompts + negatives] if batched else [g for g in (prompts, negatives) if g]


def _encode_distinct(encoder: TextEncoder, texts: list[str], max_sequence_length: int) -> np.ndarray:
    distinct = list(dict.fromkeys(texts))
    embeddings = encoder.encode(distinct, max_sequence_length)  # [distinct, L, D]
    _warn_if_cut(distinct, embeddings)
    return embeddings[[distinct.index(text) for text in texts]]


def _warn_if_cut(texts: list[str], embeddings: np.ndarray) -> None:
    """Rows are zero past a text's tokens, so a text whose last row is not zero filled every token
    and was most likely cut to fit: said on stderr, since the video ignores the rest."""
    for text, rows in zip(texts, embeddings):
        if np.any(rows[-1]):
            shown = text if len(text) <= 60 else f"{text[:57]}..."
            log.warning(
                "wanjax: warning: the prompt %r fills all %d text tokens (max_sequence_length); the rest of it "
                "was cut and has no effect", shown, len(rows),
            )  # fmt: skip
