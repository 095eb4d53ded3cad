"""The transformer extensions, one line each, in the order the block loop applies them after a
block (each one's domain half is in domain/extensions/registry.py in the same order)."""

from __future__ import annotations

from wanjax.adapters.jax.transformer.animate.extension import ANIMATE_TRANSFORMER_EXTENSION
from wanjax.adapters.jax.transformer.extension import TransformerExtension
from wanjax.adapters.jax.transformer.fps.extension import FPS_TRANSFORMER_EXTENSION
from wanjax.adapters.jax.transformer.image.extension import IMAGE_TRANSFORMER_EXTENSION
from wanjax.adapters.jax.transformer.s2v.extension import S2V_TRANSFORMER_EXTENSION
from wanjax.adapters.jax.transformer.vace.extension import VACE_TRANSFORMER_EXTENSION
from wanjax.domain.specs import TransformerSpec

EXTENSIONS: tuple[TransformerExtension, ...] = (
    IMAGE_TRANSFORMER_EXTENSION,
    VACE_TRANSFORMER_EXTENSION,
    ANIMATE_TRANSFORMER_EXTENSION,
    FPS_TRANSFORMER_EXTENSION,
    S2V_TRANSFORMER_EXTENSION,
)


def transformer_extensions(spec: TransformerSpec) -> tuple[TransformerExtension, ...]:
    """The extensions a model of this spec has (`spec.extensions`), in `EXTENSIONS`' order."""
    return tuple(extension for extension in EXTENSIONS if extension.model in spec.extensions)
