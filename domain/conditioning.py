"""Conditioning: how a Wan model takes its input image, and the arrays the denoiser receives
(each mode of domain/modes/ fills its own), each declaring how it splits across the guidance rows:
the inputs every model may read by `GUIDANCE_ROWS` (domain/guidance.py), a model extension's
(domain/extensions/) by its own `inputs`."""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from wanjax.domain.extensions.registry import model_extension
from wanjax.domain.guidance import SHARED, RowSplit


class ImageConditioning(enum.Enum):
    """What a checkpoint does with an input image."""

    NONE = "none"  # text-to-video: Wan 2.1 T2V, Wan 2.2 T2V A14B
    CHANNELS = "channels"  # mask + first-frame latents as extra input channels: Wan 2.1 I2V, 2.2 I2V A14B
    FIRST_FRAME = "first_frame"  # first latent frame replaced, its tokens at timestep 0: Wan 2.2 TI2V-5B


class Conditioning(NamedTuple):
    """Per-generation conditioning (a pytree: absent parts are None).

    extra_channels: [B, F', H', W', Cx] appended to the latents' channels at every step.
    image_context: [B, N, D] image-encoder tokens for the transformer's image cross-attention.
    first_frame: [B, 1, H', W', C] latents that replace latent frame 0 at every step and at the end.
    extensions: {extension name: {input name: array}}, the inputs of the model's extensions
      (domain/extensions/: VACE's control latents and scale, Animate's pose latents and face
      video), each as its extension declares it; None: none.

    A new field declares its `RowSplit` in `GUIDANCE_ROWS` (the guider refuses one that does not);
    a variant's own inputs belong to its extension instead.
    """

    extra_channels: Any = None
    image_context: Any = None
    first_frame: Any = None
    extensions: Mapping[str, Mapping[str, Any]] | None = None

    def map(self, fn: Callable[[Any, RowSplit], Any]) -> Conditioning:
        """Every input present replaced by `fn(input, its RowSplit)` (None stays None)."""
        fields = {}
        for name in _INPUT_FIELDS:
            if name not in GUIDANCE_ROWS:
                fix = "add it to domain/conditioning.GUIDANCE_ROWS"
                raise TypeError(f"Conditioning.{name} declares no RowSplit: {fix}")
            value = getattr(self, name)
            fields[name] = None if value is None else fn(value, GUIDANCE_ROWS[name])
        if self.extensions is not None:
            fields["extensions"] = {
                name: {key: fn(value, _split(name, key)) for key, value in inputs.items()}
                for name, inputs in self.extensions.items()
            }
        return Conditioning(**fields)

    def extension(self, name: str) -> Mapping[str, Any]:
        """The inputs of extension `name` (empty where none are given)."""
        return {} if self.extensions is None else self.extensions.get(name, {})


_INPUT_FIELDS = tuple(name for name in Conditioning._fields if name != "extensions")

GUIDANCE_ROWS: Mapping[str, RowSplit] = {
    "extra_channels": SHARED,
    "image_context": SHARED,
    "first_frame": SHARED,
}
"""How each `Conditioning` field every model may read splits across the guidance rows, by field name."""


def _split(extension: str, name: str) -> RowSplit:
    inputs = model_extension(extension).inputs
    if name not in inputs:
        raise TypeError(f"the {extension} extension declares no input {name!r}; it reads {sorted(inputs)}")
    return inputs[name]
