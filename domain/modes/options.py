"""The config section of the modes' options: every registered mode's `options` class, field for
field, so that each option is a flat config key (`strength`, `segment_frame_length`) that a
preset or `--set` gives as a default, while its mode owns it (its validator, its default)."""

from __future__ import annotations

from typing import Any

import attrs

from wanjax.domain.modes.registry import MODES


def _flat_fields() -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for mode in MODES:
        for field in attrs.fields(mode.options) if mode.options is not None else ():
            if field.name in fields:
                raise TypeError(f"mode option {field.name!r} is declared by two modes; give it one owner")
            fields[field.name] = attrs.field(
                default=field.default, validator=field.validator, metadata=field.metadata, type=field.type
            )
    return fields


ModeOptionDefaults = attrs.make_class("ModeOptionDefaults", _flat_fields(), frozen=True, kw_only=True)
ModeOptionDefaults.__doc__ = """Each mode's options' defaults for the requests of this config (a
request of a mode holds that mode's `options`, domain/modes/registry.mode_options)."""
ModeOptionDefaults.__module__ = __name__
