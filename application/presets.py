"""Presets: one YAML file per model in `wanjax.configs`, turned into a GenerationConfig."""

from __future__ import annotations

from collections.abc import Mapping
from importlib import resources
from typing import Any

import yaml

from wanjax.domain.config import GenerationConfig
from wanjax.domain.errors import ConfigError

DEFAULT_PRESET = "demo"


def preset_names() -> list[str]:
    files = resources.files("wanjax.configs").iterdir()
    return sorted(f.name.removesuffix(".yaml") for f in files if f.name.endswith(".yaml"))


def load_preset(name: str) -> GenerationConfig:
    if name not in preset_names():
        raise ConfigError(f"unknown preset {name!r}; known presets: {', '.join(preset_names())}")
    text = resources.files("wanjax.configs").joinpath(f"{name}.yaml").read_text()
    values = yaml.safe_load(text) or {}
    if not isinstance(values, dict):
        raise ConfigError(f"preset {name!r} is not a mapping of config keys")
    return GenerationConfig.from_mapping(values, source=f"preset {name!r}")


def resolve_config(model: str | None, overrides: Mapping[str, Any] = {}) -> GenerationConfig:
    """`model` names a preset, or a checkpoint (folder or repo id) run with the generic defaults."""
    if model is None:
        base = load_preset(DEFAULT_PRESET)
    elif model in preset_names():
        base = load_preset(model)
    else:
        base = GenerationConfig(model=model)
    return base.with_overrides(overrides)
