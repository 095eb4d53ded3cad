"""LoRA adapters as the user names them: a file and the strength its change is added with.

Merging happens at load (`wanjax.adapters.lora`), so sampling with LoRAs costs nothing extra;
this module only holds what a request or preset says, validated before anything loads.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

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


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def parse_lora_specs(items: Iterable[str]) -> tuple[LoraSpec, ...]:
    """Every `PATH[:SCALE]` item parsed, in order (the order deltas are added in)."""
    return tuple(LoraSpec.parse(item) for item in items)


def loras_per_expert(
    num_experts: int, loras: Iterable[str], loras_low: Iterable[str]
) -> tuple[tuple[LoraSpec, ...], ...]:
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
