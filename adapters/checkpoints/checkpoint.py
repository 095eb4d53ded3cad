"""What the application reads from a Wan checkpoint, whichever layout it comes in.

Two layouts implement `Checkpoint`: a diffusers-format folder (`diffusers_folder.py`) and
the official Wan repos' folder (`official_folder.py`). Either serves its weights under the
names wanjax loads (diffusers' for the transformer and VAE, transformers' for the encoders
once their own adapters convert them), and either may have component files replaced by
config keys (`ReplacedFiles`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

import attrs

from wanjax.adapters.checkpoints.original_names import transformer_weights
from wanjax.adapters.checkpoints.original_vae import vae_weights
from wanjax.adapters.checkpoints.weights import Weights, open_weights
from wanjax.domain.conditioning import ImageConditioning
from wanjax.domain.errors import CheckpointError, ConfigError, UnsupportedModelError
from wanjax.domain.modes.base import DescribedModel
from wanjax.domain.specs import TransformerSpec, VaeSpec

EXPERTS = ("transformer", "transformer_2")


@attrs.frozen(kw_only=True)
class ReplacedFiles:
    """Files that replace a checkpoint's own (config `transformer_file`, `transformer_2_file`,
    `vae_file`, `text_encoder_file`, `image_encoder_file`); None keeps the checkpoint's."""

    transformer: str | None = None
    transformer_2: str | None = None
    vae: str | None = None
    text_encoder: str | None = None
    image_encoder: str | None = None

    def get(self, component: str) -> Path | None:
        value = getattr(self, component, None)
        return None if value is None else Path(value).expanduser()

    def check_experts(self, experts: tuple[str, ...], root: Path) -> None:
        if self.transformer_2 is not None and "transformer_2" not in experts:
            raise ConfigError(f"transformer_2_file is set, but {root} has one transformer; leave it unset")


@attrs.frozen
class EncoderFiles:
    """A torch encoder's files: its weights (a transformers folder with its config.json, or one
    weights file whose architecture is read from its shapes) and its preprocessing (a
    tokenizer or image-processor folder; None: Wan's CLIP preprocessing)."""

    weights: Path
    preprocessing: Path | None


class Checkpoint(DescribedModel, Protocol):
    """A checkpoint opened and checked: architecture and files, nothing heavy read yet."""

    root: Path
    experts: tuple[str, ...]
    """("transformer",) or, for Wan 2.2 A14B, ("transformer", "transformer_2"): high, then low noise."""
    boundary_ratio: float | None
    """Where the low-noise expert takes over, as the checkpoint states it (None: unstated)."""

    def weights(self, component: str) -> Weights:
        """An expert's or the VAE's tensors under diffusers names; an encoder's as stored."""
        ...

    def text_encoder_files(self) -> EncoderFiles: ...

    def image_encoder_files(self) -> EncoderFiles | None:
        """None for a model without a CLIP image encoder."""
        ...

    def speech_encoder_folder(self) -> Path | None:
        """The speech encoder's transformers folder; None for a model that reads no speech (all but S2V)."""
        ...

    def verify(self) -> None:
        """Every config and weight-file header checked, no tensor read: bad files fail here."""
        ...


def shared_architecture(specs: dict[str, TransformerSpec]) -> TransformerSpec:
    """The one architecture of every expert (one compiled step serves them all), keyed by where
    each was read; Wan 2.2 experts that differ are refused."""
    first, *others = specs.values()
    if any(spec != first for spec in others):
        raise UnsupportedModelError(
            f"{' and '.join(specs)} have different architectures; Wan 2.2 experts must share one"
        )
    return first


def component_weights(component: str, location: Path) -> Weights:
    """The tensors of `component` at `location` (a folder, file or shard index): experts and the
    VAE under diffusers names whichever naming the files use, encoders as stored."""
    if component in EXPERTS:
        return transformer_weights(location)
    if component == "vae":
        return vae_weights(location)
    return open_weights(location)


def conditioning_of(
    transformer: TransformerSpec, vae: VaeSpec, *, expand_timesteps: bool, has_image_encoder: bool, root: Path
) -> ImageConditioning:
    """Read from the shapes: extra input channels mean I2V, per-token timesteps mean TI2V."""
    latent, given = vae.z_dim, transformer.in_channels
    if expand_timesteps:
        mode = ImageConditioning.FIRST_FRAME
    elif given == 2 * latent + vae.temporal_compression:  # latents + mask + image latents
        mode = ImageConditioning.CHANNELS
    elif given == latent:
        mode = ImageConditioning.NONE
    else:
        raise UnsupportedModelError(
            f"{root}: transformer in_channels={given} fits no Wan conditioning for a VAE with z_dim={latent}"
        )
    if transformer.uses_image_embeddings and not has_image_encoder:
        raise CheckpointError(
            f"{root}: the transformer takes CLIP image embeddings but the checkpoint has no image encoder; "
            "re-download it, or pass one with --set image_encoder_file=PATH"
        )
    return mode
