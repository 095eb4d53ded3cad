"""Classifier-free guidance, declared: how a conditioning input splits across the guidance rows,
and which guidance scale each expert's steps use.

Under guidance the transformer runs one batch holding every sample twice: the conditional rows
first (the prompt), then the unconditional ones (the negative prompt). Each input the
transformer reads declares what the unconditional rows see of it (a `RowSplit`, beside the
input's field in domain/conditioning.py); the guider (adapters/jax/denoising/guider.py) builds
the batch from those declarations and combines the two predictions as
unconditional + scale * (conditional - unconditional), one scale per expert (`GuidanceScales`).
"""

from __future__ import annotations

import attrs
import numpy as np


@attrs.frozen
class RowSplit:
    """How one conditioning input reaches the guidance rows.

    batched: the input has a leading sample axis [B, ...] and is laid out once per row group
      (conditional rows first); False: it is not per sample (a scale), every row reads it as is.
    unconditional_fill: None: the unconditional rows read the same value as the conditional ones;
      a number: they read an array of the input's shape filled with it (the input's blank).
    """

    batched: bool = True
    unconditional_fill: float | None = None

    def __attrs_post_init__(self) -> None:
        if not self.batched and self.unconditional_fill is not None:
            raise ValueError("an unbatched input is read as is by every row: it has no unconditional value")


SHARED = RowSplit()
"""One value [B, ...] that the conditional and the unconditional rows read alike."""

UNBATCHED = RowSplit(batched=False)
"""Not per sample (a scale): every row reads the one value."""


def blank_when_unconditional(fill: float) -> RowSplit:
    """The conditional rows read the input; the unconditional rows an array of its shape all `fill`."""
    return RowSplit(unconditional_fill=fill)


@attrs.frozen
class GuidanceScales:
    """The guidance scale of each expert's steps, by expert index: Wan 2.2 A14B's two (high-noise
    expert, low-noise expert), else one."""

    per_expert: tuple[float, ...]

    @classmethod
    def of(cls, scale: float, low_noise_scale: float | None = None) -> GuidanceScales:
        """`scale` for the high-noise expert (the only one of a one-transformer model) and
        `low_noise_scale` (None: `scale`) for the low-noise one."""
        return cls((scale, scale if low_noise_scale is None else low_noise_scale))

    def per_step(self, experts: np.ndarray) -> np.ndarray:
        """[S] float32: the scale of each step's expert (`experts` [S] int, expert indices)."""
        return np.asarray(self.per_expert, np.float32)[np.asarray(experts)]
