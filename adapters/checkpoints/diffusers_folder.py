"""A diffusers-format Wan checkpoint folder: model_index.json plus one folder per component."""

from __future__ import annotations

import json
import threading
from functools import cached_property
from pathlib import Path
from typing import Any

from wanjax.adapters.checkpoints.checkpoint import (
    EncoderFiles,
    ReplacedFiles,
    component_weights,
    conditioning_of,
    shared_architecture,
)
from wanjax.adapters.checkpoints.text_encoder_files import check_text_encoder_files
from wanjax.adapters.checkpoints.weights import Weights
from wanjax.domain.conditioning import ImageConditioning
from wanjax.domain.errors import CheckpointError, UnsupportedModelError
from wanjax.domain.specs import TransformerSpec, VaeSpec

SUPPORTED_PIPELINES = (
    "WanPipeline", "WanImageToVideoPipeline", "WanVideoToVideoPipeline", "WanVACEPipeline", "WanAnimatePipeline",
    "SkyReelsV2DiffusionForcingPipeline", "SkyReelsV2DiffusionForcingImageToVideoPipeline",
    "SkyReelsV2DiffusionForcingVideoToVideoPipeline",
)  # fmt: skip
"""The diffusers pipelines whose folders wanjax reads. Their components, not the class, decide the
modes a model runs (domain/modes.py): a WanVideoToVideoPipeline folder holds a text-to-video model."""
COMPONENTS = ("transformer", "vae", "text_encoder", "tokenizer", "scheduler")
OPTIONAL_COMPONENTS = ("transformer_2", "image_encoder", "image_processor")
WEIGHTED_COMPONENTS = ("transformer", "transformer_2", "vae", "text_encoder", "image_encoder")
CONFIG_FILE = {"scheduler": "scheduler_config.json", "image_processor": "preprocessor_config.json"}


class DiffusersCheckpoint:
    """Validated view of a checkpoint folder; nothing heavy is read until asked for.

    Components load on several threads, and Wan 2.2's two experts share byte-identical
    config and index files: in the Hugging Face cache both names link to one blob, which
    the hub client may rewrite when it revalidates. Config and index reads therefore go
    through one lock, so no reader sees a half-written file.

    `replaced` files stand in for components' weights; the architecture still comes from the
    folder's configs.
    """

    def __init__(self, root: Path, replaced: ReplacedFiles = ReplacedFiles()) -> None:
        self.root = Path(root)
        self.replaced = replaced
        self._metadata_lock = threading.Lock()
        if not self.root.is_dir():
            raise CheckpointError(f"checkpoint folder not found: {self.root}")
        index = read_json(self.root / "model_index.json", what="a diffusers-format Wan checkpoint")
        pipeline = index.get("_class_name")
        if pipeline not in SUPPORTED_PIPELINES:
            raise UnsupportedModelError(
                f"{self.root}: pipeline {pipeline!r} is not supported; supported: {', '.join(SUPPORTED_PIPELINES)}"
            )
        present = {name for name in OPTIONAL_COMPONENTS if _names_component(index.get(name))}
        self.components = (*COMPONENTS, *(name for name in OPTIONAL_COMPONENTS if name in present))
        self.experts = ("transformer", "transformer_2") if "transformer_2" in present else ("transformer",)
        self.boundary_ratio: float | None = index.get("boundary_ratio")
        self.expand_timesteps = bool(index.get("expand_timesteps", False))
        replaced.check_experts(self.experts, self.root)
        for component in self.components:
            if not self.folder(component).is_dir():
                raise CheckpointError(
                    f"{self.root}: component folder {component}/ is missing; re-download the checkpoint"
                )

    def folder(self, component: str) -> Path:
        return self.root / component

    def has(self, component: str) -> bool:
        return component in self.components

    def config(self, component: str) -> dict[str, Any]:
        path = self.folder(component) / CONFIG_FILE.get(component, "config.json")
        with self._metadata_lock:
            return read_json(path, what=f"the {component} config")

    def weights(self, component: str) -> Weights:
        with self._metadata_lock:
            return component_weights(component, self.replaced.get(component) or self.folder(component))

    @cached_property
    def transformer_spec(self) -> TransformerSpec:
        """The architecture every expert shares (one compiled step serves them all)."""
        configs = {str(self.folder(expert) / "config.json"): self.config(expert) for expert in self.experts}
        return shared_architecture(
            {source: TransformerSpec.from_diffusers_config(config, source=source) for source, config in configs.items()}
        )

    @cached_property
    def vae_spec(self) -> VaeSpec:
        return VaeSpec.from_diffusers_config(self.config("vae"), source=str(self.folder("vae") / "config.json"))

    @cached_property
    def image_conditioning(self) -> ImageConditioning:
        return conditioning_of(
            self.transformer_spec, self.vae_spec, expand_timesteps=self.expand_timesteps,
            has_image_encoder=self.image_encoder_files() is not None, root=self.root,
        )  # fmt: skip

    def text_encoder_files(self) -> EncoderFiles:
        return EncoderFiles(self.replaced.get("text_encoder") or self.folder("text_encoder"), self.folder("tokenizer"))

    def speech_encoder_folder(self) -> Path | None:
        return None  # diffusers has no speech-driven Wan pipeline

    def image_encoder_files(self) -> EncoderFiles | None:
        """The folder's `image_encoder/` (or `image_encoder_file`) with its `image_processor/`."""
        weights = self.replaced.get("image_encoder")
        if weights is None and self.has("image_encoder"):
            weights = self.folder("image_encoder")
        if weights is None:
            return None
        return EncoderFiles(weights, self.folder("image_processor") if self.has("image_processor") else None)

    def verify(self) -> None:
        """Checks every config and every weight file header (of the replacing files where given),
        reading no tensor data."""
        _ = self.image_conditioning
        for component in self.components:
            if component not in ("tokenizer", "transformer", "transformer_2", "vae"):
                self.config(component)
        for component in WEIGHTED_COMPONENTS:
            if self.has(component) or self.replaced.get(component) is not None:
                self.weights(component)
        check_text_encoder_files(self.text_encoder_files(), self.weights("text_encoder"))


def _names_component(entry: object) -> bool:
    """model_index.json lists an absent optional component as null or [null, null]."""
    return isinstance(entry, list) and any(part is not None for part in entry)


def read_json(path: Path, *, what: str) -> dict[str, Any]:
    if not path.is_file():
        raise CheckpointError(f"{path} is missing, so {path.parent} is not {what}; re-download the checkpoint")
    try:
        value = json.loads(path.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise CheckpointError(f"{path}: corrupt JSON ({err}); re-download the checkpoint") from None
    if not isinstance(value, dict):
        raise CheckpointError(f"{path}: expected a JSON object; re-download the checkpoint")
    return value
