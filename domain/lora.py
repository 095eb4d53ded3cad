"""LoRA adapters as the user names them: a file and the strength its change is added with.

The config's LoRAs (`--lora`) are merged at load (`wanjax.adapters.lora`), so sampling with them
costs nothing extra; a request's own (`GenerationRequest.loras`) are merged on the device for
its run (`wanjax.adapters.jax.lora`). This module only holds what a request or preset says,
validated before anything loads.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sized
from typing import Any

import sys

import attrs

from wanjax.domain.errors import ConfigError
from wanjax.domain.numbers import is_finite_number, parse_decimal, shown

LORA_SUFFIX = ".safetensors"
MAX_LORA_SCALE = 100.0
"""A request's LoRA scale is from -MAX_LORA_SCALE to MAX_LORA_SCALE (ComfyUI's LoraLoader takes the
same range; published LoRAs are used at 0.3 to 1.5, a negative scale subtracts a LoRA's change).
The config's own LoRAs (`--lora`, a preset) take any finite scale, as diffusers'
`set_adapters` does: the bound guards a server from its clients, not a user from themselves."""
MAX_LORAS_PER_EXPERT = 8
"""A request's LoRAs of one expert at most: each is merged into the expert's parameters on the
device for the run, a cost (and a copy of every changed parameter) that grows with their number."""
MAX_REQUEST_LORAS = 12
"""A request's LoRAs of both experts together at most (Wan 2.2 A14B's `loras` and `loras_low`)."""


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
            return cls(path=path, scale=checked_scale(scale, f"LoRA {shown(text)}: the scale after ':'"))
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
        raise ConfigError(f"LoRA {shown(item)}: give PATH[:SCALE] text or a LoraSpec(path, scale)")
    if not isinstance(spec.path, str) or not spec.path.strip():
        raise ConfigError(f"LoRA {shown(item)}: the path must be a non-empty text")
    if any(ord(character) < 32 for character in spec.path):
        raise ConfigError(f"LoRA {shown(item)}: the path holds a control character (a NUL byte, a line break); "
                          "give the file's path as text")  # fmt: skip
    return LoraSpec(spec.path, checked_scale(spec.scale, f"LoRA {shown(item)}: the scale"))


def checked_scale(scale: Any, what: str, *, limit: float | None = None) -> float:
    """`scale` as a float, finite (an int too large for a float is not), from -limit to limit when
    a limit is given; a ConfigError starting with `what`."""
    bound = sys.float_info.max if limit is None else limit
    if not is_finite_number(scale) or not -bound <= scale <= bound:
        span = "" if limit is None else f" from {-limit:g} to {limit:g}"
        raise ConfigError(f"{what} must be a finite number{span}, e.g. 0.8")
    return float(scale)


def _number(text: str) -> float | None:
    try:
        return parse_decimal(text)
    except ValueError:
        return None


def parse_lora_specs(items: Iterable[str | LoraSpec]) -> tuple[LoraSpec, ...]:
    """Every item (`PATH[:SCALE]` text or a LoraSpec) checked, in order (the order deltas are added in)."""
    return tuple(lora_spec(item) for item in items)


def check_request_loras(fields: Mapping[str, Sized]) -> None:
    """A request's LoRAs (by field: `loras`, `loras_low`, each one expert's) within
    MAX_LORAS_PER_EXPERT each and MAX_REQUEST_LORAS together, and the scales of those already
    parsed (LoraSpecs) within MAX_LORA_SCALE; a ConfigError naming the field."""
    for field, specs in fields.items():
        if len(specs) > MAX_LORAS_PER_EXPERT:
            raise ConfigError(f"{field}: {len(specs)} LoRAs; a request applies at most {MAX_LORAS_PER_EXPERT} "
                              "per expert (merge some into one file, or drop some)")  # fmt: skip
        for spec in specs if isinstance(specs, Iterable) else ():
            if isinstance(spec, LoraSpec):
                checked_scale(spec.scale, f"{field}: LoRA {shown(spec.path)}: the scale", limit=MAX_LORA_SCALE)
    total = sum(len(specs) for specs in fields.values())
    if total > MAX_REQUEST_LORAS:
        raise ConfigError(f"{' and '.join(fields)}: {total} LoRAs together; a request applies at most "
                          f"{MAX_REQUEST_LORAS} (merge some into one file, or drop some)")  # fmt: skip


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
