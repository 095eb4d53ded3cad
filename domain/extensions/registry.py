"""The model extensions, in the order the block loop applies them after each block: one line each."""

from __future__ import annotations

from wanjax.domain.extensions.animate import ANIMATE_EXTENSION
from wanjax.domain.extensions.base import ModelExtension
from wanjax.domain.extensions.fps import FPS_EXTENSION
from wanjax.domain.extensions.image import IMAGE_EXTENSION
from wanjax.domain.extensions.s2v import S2V_EXTENSION
from wanjax.domain.extensions.vace import VACE_EXTENSION
from wanjax.domain.specs import TransformerSpec

MODEL_EXTENSIONS: tuple[ModelExtension, ...] = (
    IMAGE_EXTENSION, VACE_EXTENSION, ANIMATE_EXTENSION, FPS_EXTENSION, S2V_EXTENSION,
)  # fmt: skip


def extensions_of(spec: TransformerSpec) -> tuple[ModelExtension, ...]:
    """The extensions a model of this spec has, in `MODEL_EXTENSIONS`' order."""
    return tuple(extension for extension in MODEL_EXTENSIONS if extension.present(spec))


def model_extension(name: str) -> ModelExtension:
    """The extension named `name` (a key of `Conditioning.extensions`)."""
    for extension in MODEL_EXTENSIONS:
        if extension.name == name:
            return extension
    raise KeyError(f"no model extension {name!r}; known: {[e.name for e in MODEL_EXTENSIONS]}")
