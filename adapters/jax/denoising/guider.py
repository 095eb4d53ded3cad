"""Classifier-free guidance on the device: the transformer's batch of guidance rows, built from
each conditioning input's declared `RowSplit` (domain/conditioning.GUIDANCE_ROWS, or its model
extension's `inputs`), and the guided
prediction combined from the rows' predictions. The one place that knows the row layout: the
conditional rows first, then the unconditional ones, each a copy of the B samples.
"""

from __future__ import annotations

from typing import Any

import attrs
import jax
import jax.numpy as jnp
import numpy as np

from wanjax.adapters.jax.transformer.blocks import CrossAttentionKV
from wanjax.domain.conditioning import GUIDANCE_ROWS, Conditioning
from wanjax.domain.guidance import RowSplit

TextInput = CrossAttentionKV | jax.Array
"""An expert's text input: its cross-attention K/V cache ([layers, copies * B, L, N, H] ...), or the
text embeddings [copies * B, L, text_dim] from which every step recomputes them (conditional rows first)."""


@attrs.frozen
class Guider:
    """Classifier-free guidance over `copies` rows per sample: 2 (conditional, unconditional) or 1
    (guidance off, or the CFG cache's conditional pass: the conditional rows alone)."""

    copies: int

    @classmethod
    def for_prompts(cls, negative_context: Any) -> Guider:
        """Guidance runs exactly when there are negative prompts (the request's scale above 1)."""
        return cls(1 if negative_context is None else 2)

    @classmethod
    def of_text(cls, text: TextInput, batch: int) -> Guider:
        """The guider whose rows `text` (a `TextInput` of `text_rows`) holds for `batch` samples."""
        rows = text.text_k.shape[1] if isinstance(text, CrossAttentionKV) else text.shape[0]
        return cls(rows // batch)

    @property
    def conditional(self) -> Guider:
        """The guider of the conditional rows alone."""
        return Guider(1)

    def text_rows(self, context: np.ndarray, negative_context: np.ndarray | None) -> np.ndarray:
        """The text embeddings' rows: the prompts' [B, L, D], then the negative prompts' (a pair of
        inputs, one per row group)."""
        return context if self.copies == 1 else np.concatenate([context, negative_context], axis=0)

    def conditional_text(self, text: TextInput, batch: int) -> TextInput:
        """The conditional rows of a `TextInput` of these rows (the first `batch`)."""
        if isinstance(text, CrossAttentionKV):
            return jax.tree.map(lambda a: a[:, :batch], text)  # [layers, rows, ...]
        return text[:batch]

    def latent_rows(self, latents: jax.Array) -> jax.Array:
        """latents [B, ...] -> [copies * B, ...]: every row group reads the same latents."""
        return self.split_rows(latents, RowSplit())

    def rows(self, conditioning: Conditioning) -> Conditioning:
        """Every input of `conditioning` laid out for the rows, as it declares (`GUIDANCE_ROWS`, or
        its extension's `inputs`)."""
        return conditioning.map(self.split_rows)

    def field_rows(self, conditioning: Conditioning, name: str) -> Any:
        """Field `name` of `conditioning` (one every model may read) laid out for the rows (None stays None)."""
        value = getattr(conditioning, name)
        return None if value is None else self.split_rows(value, GUIDANCE_ROWS[name])

    def split_rows(self, value: jax.Array, split: RowSplit) -> jax.Array:
        """One input [B, ...] as `split` lays it out over `copies` row groups (conditional first)."""
        if not split.batched or self.copies == 1:
            return value
        unconditional = value if split.unconditional_fill is None else jnp.full_like(value, split.unconditional_fill)
        return jnp.concatenate([value] + [unconditional] * (self.copies - 1))

    def split(self, prediction: jax.Array) -> tuple[jax.Array, jax.Array]:
        """The rows' prediction [2 * B, ...] -> (conditional, unconditional) [B, ...] each."""
        conditional, unconditional = jnp.split(prediction, 2)
        return conditional, unconditional

    def combine(self, prediction: jax.Array, scale: jax.Array) -> jax.Array:
        """The guided prediction [B, ...] of the rows' prediction [copies * B, ...] at this step's
        scale (the step's expert's; one row group: the prediction as it is)."""
        return prediction if self.copies == 1 else self.guided(*self.split(prediction), scale)

    @staticmethod
    def guided(conditional: jax.Array, unconditional: jax.Array, scale: jax.Array) -> jax.Array:
        """Classifier-free guidance of the two predictions [B, ...] float32."""
        return unconditional + scale * (conditional - unconditional)
