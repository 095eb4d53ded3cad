"""Presets (one YAML file per model in `wanjax.configs`) and the config a run resolves to.

Each key's value comes from the highest of, in order: the command line (`--set` and flags),
the preset, the checkpoint folder (a diffusers folder's scheduler config and model index;
for an official-format folder, the preset of the Wan-AI repo it holds), the generic
default. The config remembers which (`GenerationConfig.origin`).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from wanjax.domain.architectures import without_diffusers_suffix
from wanjax.domain.config import GenerationConfig
from wanjax.domain.errors import ConfigError

DEFAULT_PRESET = "demo"


def preset_names() -> list[str]:
    files = resources.files("wanjax.configs").iterdir()
    return sorted(f.name.removesuffix(".yaml") for f in files if f.name.endswith(".yaml"))


def _preset_values(name: str) -> dict[str, Any]:
    if name not in preset_names():
        raise ConfigError(f"unknown preset {name!r}; known presets: {', '.join(preset_names())}")
    text = resources.files("wanjax.configs").joinpath(f"{name}.yaml").read_text()
    values = yaml.safe_load(text) or {}
    if not isinstance(values, dict):
        raise ConfigError(f"preset {name!r} is not a mapping of config keys")
    return values


def load_preset(name: str) -> GenerationConfig:
    return GenerationConfig.from_mapping(_preset_values(name), source=f"preset {name!r}")


def preset_for_checkpoint(model: str) -> str | None:
    """The preset of a published repo id: the preset named after the repo that it names,
    in diffusers or the official layout (Wan-AI/Wan2.2-T2V-A14B-Diffusers and
    Wan-AI/Wan2.2-T2V-A14B -> wan2.2-t2v-a14b; few-step variants name the same repo under
    other names). None for anything else: folders, other repos."""
    for name in preset_names():
        repo = str(_preset_values(name).get("model", ""))
        own_name = without_diffusers_suffix(repo).rpartition("/")[2].lower()
        if own_name == name and model in (repo, without_diffusers_suffix(repo)):
            return name
    return None


def _preset_of_file(file: Path) -> str:
    """The preset of the published model a lone transformer file is (`checkpoints.recognise`): the rest
    of the model (VAE, text and image encoders, tokenizer) comes from that preset's checkpoint."""
    from wanjax.adapters.checkpoints.recognise import recognised_repo

    repo = recognised_repo(file)
    preset = preset_for_checkpoint(repo)
    if preset is None:
        raise ConfigError(
            f"{file} is a {repo} transformer, which no preset runs; add configs/<name>.yaml with model: {repo}"
        )
    return preset


def _without_diffusers_suffix(repo: str) -> str:
    """The official repo of a diffusers one: "-Diffusers" (Wan 2.1 VACE's: "-diffusers") cut off."""
    cut = len(repo) - len(DIFFUSERS_SUFFIX)
    return repo[:cut] if repo[cut:].lower() == DIFFUSERS_SUFFIX.lower() else repo


def resolve_config(
    model: str | None, overrides: Mapping[str, Any] = {}, *, read_checkpoint: bool = True
) -> GenerationConfig:
    """The config of a run of `model` (a preset, a repo id or a folder; None: the demo).

    With `read_checkpoint`, the checkpoint is located (downloaded if it must be) and its
    sampling settings are read; a setting no wanjax solver implements is a ConfigError unless
    the preset or `overrides` choose the sampler (`sample_solver`).
    """
    model_layer: dict[str, Any] = {"model": model}
    if model is not None and Path(model).expanduser().is_file():  # a lone transformer file
        model_layer = {"transformer_file": model}
        model = _preset_of_file(Path(model).expanduser())
    preset = DEFAULT_PRESET if model is None else model if model in preset_names() else preset_for_checkpoint(model)
    if model is not None and preset is None:
        _check_not_a_misspelt_preset(model)
    layers: list[tuple[str, Mapping[str, Any]]] = []
    if preset is not None:
        layers.append((f"preset {preset!r}", _preset_values(preset)))
    if model is not None and model != preset or "transformer_file" in model_layer:
        layers.append(("--model", model_layer))
    layers.append(("--set", overrides))
    config = _layered(GenerationConfig(), layers)
    if read_checkpoint:
        config = _layered(_with_checkpoint_settings(config), layers)
    return _one_expert_switch(config, [source for source, _ in layers])


EXPERT_SWITCH_KEYS = ("boundary_ratio", "expert_switch_step")


def _one_expert_switch(config: GenerationConfig, layer_sources: list[str]) -> GenerationConfig:
    """boundary_ratio and expert_switch_step both place Wan 2.2's expert switch: when two
    layers set one each (a checkpoint's boundary and a few-step preset's switch step), the
    higher layer's stands and the other is unset. Both in one layer stay, for the request
    to refuse by name."""
    if any(config.value(key) is None for key in EXPERT_SWITCH_KEYS):
        return config

    def rank(key: str) -> int:
        origin = config.origin(key)
        return -1 if origin.startswith("checkpoint") else layer_sources.index(origin)

    lower, higher = sorted(EXPERT_SWITCH_KEYS, key=rank)
    if rank(lower) == rank(higher):
        return config
    return config.with_overrides({lower: None}, source=f"unset: {higher} comes from {config.origin(higher)}")


def _check_not_a_misspelt_preset(model: str) -> None:
    """A bare `--model` name (no '/': not a repo id or path) that names no folder but nearly a
    preset (another case, a typo) is refused with the preset's name."""
    if "/" in model or Path(model).expanduser().exists():
        return
    by_lower = {name.lower(): name for name in preset_names()}
    close = difflib.get_close_matches(model.lower(), list(by_lower), n=1, cutoff=0.85)
    if close:
        raise ConfigError(
            f"--model {model!r} is no folder and no preset; did you mean the preset {by_lower[close[0]]!r}? "
            "(`wanjax presets` lists them)"
        )


def _layered(config: GenerationConfig, layers: list[tuple[str, Mapping[str, Any]]]) -> GenerationConfig:
    for source, values in layers:
        config = config.with_overrides(values, source=source)
    return config


def _with_checkpoint_settings(config: GenerationConfig) -> GenerationConfig:
    """A default config for `config.model.location` with the checkpoint's settings, checked against what
    `config` (the layers above the checkpoint) chooses."""
    from wanjax.adapters.checkpoints.official_folder import official_repo_id
    from wanjax.adapters.checkpoints.scheduler_settings import checkpoint_sampling
    from wanjax.application.builders import locate_model

    folder = locate_model(config.model.location)
    stated = checkpoint_sampling(folder)
    if stated.unsupported and config.origin("sample_solver") == "default":
        raise ConfigError(
            f"{stated.source} asks for scheduler settings wanjax does not implement: "
            f"{'; '.join(stated.unsupported)}. Choose wanjax's sampler explicitly to run it anyway, "
            "e.g. --set sample_solver=unipc flow_shift=5"
        )
    defaults = GenerationConfig().with_overrides(stated.values, source=stated.source)
    repo = official_repo_id(folder)
    own_preset = preset_for_checkpoint(repo) if repo is not None else None
    if own_preset is None:
        return defaults
    # An official folder states no sampling settings; the Wan code's own for its model are
    # the preset's (each preset names its sources), the folder itself staying the model.
    values = {key: value for key, value in _preset_values(own_preset).items() if key != "model"}
    return defaults.with_overrides(values, source=f"checkpoint {folder} ({repo}: preset {own_preset!r})")
