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
ATTENTION_BACKENDS = ("xla",)


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
        for key in values:
            _check_known(key, source)
        typed = {key: _coerce(key, value, source) for key, value in values.items()}
        return cls(**typed)

    def with_overrides(self, overrides: Mapping[str, Any], *, source: str = "--set") -> GenerationConfig:
        """A copy with `overrides` applied; string values are parsed to the key's type."""
        for key in overrides:
            _check_known(key, source)
        typed = {key: _coerce(key, value, source) for key, value in overrides.items()}
        return attrs.evolve(self, **typed)

    def request(self, prompt: str, **overrides: Any) -> GenerationRequest:
        """A request with this config's sampling defaults, overridden where given (None = default)."""
        names = {f.name for f in attrs.fields(GenerationRequest)}
        values = {name: getattr(self, name) for name in names if name != "prompt"}
        values.update({k: v for k, v in overrides.items() if v is not None})
        unknown = set(values) - names
        if unknown:
            raise ConfigError(f"unknown request field(s) {sorted(unknown)}; known: {sorted(names)}")
        return GenerationRequest(prompt=prompt, **values)


def _check_known(key: str, source: str) -> None:
    known = GenerationConfig.keys()
    if key in known:
        return
    close = difflib.get_close_matches(key, known, n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    raise ConfigError(f"{source}: unknown config key {key!r}.{hint} Known keys: {', '.join(known)}")


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def _coerce(key: str, value: Any, source: str) -> Any:
    """Parses `value` into the type of `key`'s default; a mismatch is a ConfigError."""
    kind = type(attrs.fields_dict(GenerationConfig)[key].default)
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
