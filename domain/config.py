"""Generation config: every key a preset or `--set key=value` may give, typed and validated.

Keys that maxdiffusion's Wan configs use keep their names (scan_layers, flow_shift, ...).
Engine keys (model, dtype, ...) decide what is loaded; the others are sampling defaults
that each request may override.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

import attrs

from wanjax.domain.errors import ConfigError
from wanjax.domain.requests import SOLVERS, GenerationRequest

DTYPES = ("auto", "float32", "bfloat16")
ATTENTION_BACKENDS = ("xla", "pallas", "tokamax")


def _one_of(allowed: tuple[str, ...]):
    def check(_: Any, attribute: attrs.Attribute, value: str) -> None:
        if value not in allowed:
            raise ConfigError(f"{attribute.name}={value!r}: must be one of {', '.join(allowed)}")

    return check


def _positive(_: Any, attribute: attrs.Attribute, value: int) -> None:
    if value < 1:
        raise ConfigError(f"{attribute.name}={value!r}: must be >= 1")


@attrs.frozen(kw_only=True)
class GenerationConfig:
    """A preset with overrides applied."""

    # engine
    model: str = "demo"
    dtype: str = attrs.field(default="auto", validator=_one_of(DTYPES))
    scan_layers: bool = True
    attention: str = attrs.field(default="xla", validator=_one_of(ATTENTION_BACKENDS))
    max_sequence_length: int = attrs.field(default=512, validator=_positive)
    # sampling defaults
    height: int = 480
    width: int = 832
    num_frames: int = 81
    num_inference_steps: int = 50
    guidance_scale: float = 5.0
    guidance_scale_low: float | None = attrs.field(default=None, metadata={"parse": float})
    boundary_ratio: float | None = attrs.field(default=None, metadata={"parse": float})
    flow_shift: float = 3.0
    sample_solver: str = attrs.field(default="unipc", validator=_one_of(SOLVERS))
    negative_prompt: str = ""
    seed: int = 0
    fps: int = attrs.field(default=16, validator=_positive)

    @classmethod
    def keys(cls) -> tuple[str, ...]:
        return tuple(f.name for f in attrs.fields(cls))

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any], *, source: str = "config") -> GenerationConfig:
        """Builds a config from typed values (a parsed preset), rejecting unknown keys."""
        return cls(**_typed(values, source))

    def with_overrides(self, overrides: Mapping[str, Any], *, source: str = "--set") -> GenerationConfig:
        """A copy with `overrides` applied; string values are parsed to the key's type."""
        return attrs.evolve(self, **_typed(overrides, source))

    def request(self, prompt: str, **overrides: Any) -> GenerationRequest:
        """A request with this config's sampling defaults, overridden where given (None = default)."""
        names = {f.name for f in attrs.fields(GenerationRequest)}
        values = {name: getattr(self, name) for name in names & set(self.keys())}
        values.update({k: v for k, v in overrides.items() if v is not None})
        unknown = set(values) - names
        if unknown:
            raise ConfigError(f"unknown request field(s) {sorted(unknown)}; known: {sorted(names)}")
        return GenerationRequest(prompt=prompt, **values)


# Other names users of maxdiffusion and diffusers know for the same keys.
ALIASES = {"guidance_scale_high": "guidance_scale", "guidance_scale_2": "guidance_scale_low"}


def _typed(values: Mapping[str, Any], source: str) -> dict[str, Any]:
    typed: dict[str, Any] = {}
    for given, value in values.items():
        key = ALIASES.get(given, given)
        _check_known(key, source)
        if key in typed:
            raise ConfigError(f"{source}: {given!r} sets {key!r} a second time; give it once")
        typed[key] = _coerce(key, value, source)
    return typed


def _check_known(key: str, source: str) -> None:
    known = GenerationConfig.keys()
    if key in known:
        return
    close = difflib.get_close_matches(key, (*known, *ALIASES), n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    raise ConfigError(f"{source}: unknown config key {key!r}.{hint} Known keys: {', '.join(known)}")


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def _coerce(key: str, value: Any, source: str) -> Any:
    """Parses `value` into the type of `key`'s default; a mismatch is a ConfigError.

    Keys whose default is None name their type in metadata["parse"] and accept none/null.
    """
    field = attrs.fields_dict(GenerationConfig)[key]
    kind = field.metadata.get("parse", type(field.default))
    if "parse" in field.metadata and (value is None or str(value).strip().lower() in ("none", "null", "")):
        return None
    try:
        if kind is bool:
            if isinstance(value, bool):
                return value
            text = str(value).strip().lower()
            if text in _TRUE or text in _FALSE:
                return text in _TRUE
            raise ValueError
        if kind is int:
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError
            return int(value)
        if kind is float:
            if isinstance(value, bool):
                raise ValueError
            return float(value)
        return value if isinstance(value, str) else str(value)
    except ValueError:
        raise ConfigError(f"{source}: {key}={value!r} is not a valid {kind.__name__}") from None
