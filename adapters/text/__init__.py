"""Prompt text before any encoder: diffusers' cleaning, and the tokenizer without torch."""
