"""A diffusers-format Wan checkpoint folder: model_index.json plus one folder per component."""

from __future__ import annotations

import json
from functools import cached_property
from pathlib import Path
from typing import Any

from wanjax.adapters.checkpoints.weights import ComponentWeights
from wanjax.domain.errors import CheckpointError, UnsupportedModelError
from wanjax.domain.specs import TransformerSpec, VaeSpec

SUPPORTED_PIPELINES = ("WanPipeline",)
COMPONENTS = ("transformer", "vae", "text_encoder", "tokenizer", "scheduler")
WEIGHTED_COMPONENTS = ("transformer", "vae", "text_encoder")
CONFIG_FILE = {"scheduler": "scheduler_config.json"}


class DiffusersCheckpoint:
    """Validated view of a checkpoint folder; nothing heavy is read until asked for."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        if not self.root.is_dir():
            raise CheckpointError(f"checkpoint folder not found: {self.root}")
        index = _read_json(self.root / "model_index.json", what="a diffusers-format Wan checkpoint")
        pipeline = index.get("_class_name")
        if pipeline not in SUPPORTED_PIPELINES:
            raise UnsupportedModelError(
                f"{self.root}: pipeline {pipeline!r} is not supported yet; supported: {', '.join(SUPPORTED_PIPELINES)}"
            )
        self.experts = ("transformer", "transformer_2") if _names_component(index.get("transformer_2")) else ("transformer",)
        self.boundary_ratio: float | None = index.get("boundary_ratio")
        for component in (*COMPONENTS, *self.experts[1:]):
            if not self.folder(component).is_dir():
                raise CheckpointError(
                    f"{self.root}: component folder {component}/ is missing; re-download the checkpoint"
                )

    def folder(self, component: str) -> Path:
        return self.root / component

    def config(self, component: str) -> dict[str, Any]:
        path = self.folder(component) / CONFIG_FILE.get(component, "config.json")
        return _read_json(path, what=f"the {component} config")

    def weights(self, component: str) -> ComponentWeights:
        return ComponentWeights(self.folder(component))

    @cached_property
    def transformer_spec(self) -> TransformerSpec:
        """The architecture every expert shares (one compiled step serves them all)."""
        specs = [TransformerSpec.from_diffusers_config(self.config(expert)) for expert in self.experts]
        if any(spec != specs[0] for spec in specs[1:]):
            raise UnsupportedModelError(
                f"{self.root}: transformer/ and transformer_2/ have different architectures; "
                "Wan 2.2 experts must share one"
            )
        return specs[0]

    @cached_property
    def vae_spec(self) -> VaeSpec:
        return VaeSpec.from_diffusers_config(self.config("vae"))

    def verify(self) -> None:
        """Checks every config and every weight file header, reading no tensor data."""
        _ = self.transformer_spec, self.vae_spec
        self.config("scheduler")
        self.config("text_encoder")
        for component in (*WEIGHTED_COMPONENTS, *self.experts[1:]):
            self.weights(component)


def _names_component(entry: object) -> bool:
    """model_index.json lists an absent optional component as null or [null, null]."""
    return isinstance(entry, list) and any(part is not None for part in entry)


def _read_json(path: Path, *, what: str) -> dict[str, Any]:
    if not path.is_file():
        raise CheckpointError(f"{path} is missing, so {path.parent} is not {what}; re-download the checkpoint")
    try:
        value = json.loads(path.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise CheckpointError(f"{path}: corrupt JSON ({err}); re-download the checkpoint") from None
    if not isinstance(value, dict):
        raise CheckpointError(f"{path}: expected a JSON object; re-download the checkpoint")
    return value
