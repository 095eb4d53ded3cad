"""LoRA adapters as the user names them: a file and the strength its change is added with.

The config's LoRAs (`--lora`) are merged at load (`wanjax.adapters.lora`), so sampling with them
costs nothing extra; a request's own (`GenerationRequest.loras`) are merged on the device for
its run (`wanjax.adapters.jax.lora`). This module only holds what a request or preset says,
validated before anything loads.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from wanjax.domain.errors import ConfigError

LORA_SUFFIX = ".safetensors"


@attrs.frozen
class LoraSpec:
    """One LoRA file and its scale: the merged weight is W + scale * (the file's delta)."""

    path: str
    scale: float = 1.0

    @classmethod
    def parse(cls, text: str) -> LoraSpec:
        """`PATH` or `PATH:SCALE` (e.g. `style.safetensors:0.8`).

        The scale is what follows the last ':'; a path that itself ends in `.safetensors`
        needs none (so `C:\\loras\\a.safetensors` stays one path).
        """
        text = str(text).strip()
        path, sep, suffix = text.rpartition(":")
        scale = _number(suffix) if sep and path else None
        if scale is not None:
            if not math.isfinite(scale):
                raise ConfigError(f"LoRA {text!r}: the scale after ':' must be a finite number")
            return cls(path=path, scale=scale)
        if not text.endswith(LORA_SUFFIX):
            raise ConfigError(
                f"LoRA {text!r}: expected PATH[:SCALE] with a {LORA_SUFFIX} file, "
                f"e.g. style{LORA_SUFFIX}:0.8"
            )
        return cls(path=text)


def lora_spec(item: Any) -> LoraSpec:
    """A LoraSpec from itself, `PATH[:SCALE]` text or a mapping {"path": ..., "scale": ...} (a job
    record's form); ConfigError naming what is wrong."""
    if isinstance(item, LoraSpec):
        spec = item
    elif isinstance(item, str):
        spec = LoraSpec.parse(item)
    elif isinstance(item, Mapping) and set(item) <= {"path", "scale"} and "path" in item:
        spec = LoraSpec(**item)
    else:
        raise ConfigError(f"LoRA {item!r}: give PATH[:SCALE] text or a LoraSpec(path, scale)")
    scale = spec.scale
    if not isinstance(spec.path, str) or not spec.path.strip():
        raise ConfigError(f"LoRA {item!r}: the path must be a non-empty text")
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not math.isfinite(scale):
        raise ConfigError(f"LoRA {item!r}: the scale must be a finite number, e.g. 0.8")
    return LoraSpec(spec.path, float(scale))


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def parse_lora_specs(items: Iterable[str | LoraSpec]) -> tuple[LoraSpec, ...]:
    """Every item (`PATH[:SCALE]` text or a LoraSpec) checked, in order (the order deltas are added in)."""
    return tuple(lora_spec(item) for item in items)


LoraSet = tuple[tuple[LoraSpec, ...], ...]
"""The LoRAs of each expert of a model, high-noise expert first: what one run applies."""


def loras_per_expert(
    num_experts: int, loras: Iterable[str | LoraSpec], loras_low: Iterable[str | LoraSpec]
) -> LoraSet:
    """The LoRAs of each expert: `loras` go to the first (the only one, or Wan 2.2's high-noise
    `transformer`), `loras_low` to the low-noise `transformer_2`, as diffusers'
    `load_lora_weights(..., load_into_transformer_2=True)` does."""
    high, low = parse_lora_specs(loras), parse_lora_specs(loras_low)
    if num_experts == 1:
        if low:
            raise ConfigError(
                "loras_low (--lora-low) is for the low-noise expert of two-expert (Wan 2.2 A14B) models; "
                "this model has one transformer: give its LoRAs with --lora"
            )
        return (high,)
    return (high, low)
