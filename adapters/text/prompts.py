"""Prompt checks and diffusers' Wan prompt cleaning, shared by the torch and JAX text encoders."""

from __future__ import annotations

import html
from collections.abc import Sequence

import regex

from wanjax.domain.errors import InvalidRequestError


def clean_prompt(text: str) -> str:
    """diffusers' Wan `prompt_clean`: ftfy repair when ftfy is installed (as diffusers does),
    HTML entities unescaped twice, runs of whitespace collapsed to one space, ends stripped.

    `regex` rather than `re` because their `\\s` differ (U+001C..U+001F) and diffusers uses `regex`.
    """
    try:
        import ftfy
    except ImportError:
        pass
    else:
        text = ftfy.fix_text(text)
    text = html.unescape(html.unescape(text)).strip()
    return regex.sub(r"\s+", " ", text).strip()


def cleaned_prompts(prompts: Sequence[str], max_sequence_length: int) -> list[str]:
    """The prompts cleaned, after checking the call: a non-empty list and a positive length."""
    if isinstance(prompts, str) or len(prompts) == 0:
        raise InvalidRequestError(f"prompts must be a non-empty list of strings, got {prompts!r}")
    if max_sequence_length < 1:
        raise InvalidRequestError(f"max_sequence_length must be >= 1, got {max_sequence_length}")
    return [clean_prompt(prompt) for prompt in prompts]
