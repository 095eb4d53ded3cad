"""What a request asks of step caching: one policy and its parameters, validated on construction.

`CacheSettings` is the flat config section of docs/caching.md: `policy` (`cache_policy`),
`model` (`cache_model`) and every registered policy's settings section, field for field, so each
policy's keys stay flat config keys (`magcache_thresh`, `cfg_cache_interval`, ...) while the
policy owns them (domain/caching/registry.py). `model`'s published calibration (MagCache curve,
TeaCache polynomial) stands in where a section gives none.
"""

from __future__ import annotations

from typing import Any

import attrs

from wanjax.domain.caching.checks import one_of
from wanjax.domain.caching.combinations import check_combination
from wanjax.domain.caching.policy import CachePolicy, HeldState
from wanjax.domain.caching.published import PUBLISHED, PublishedCalibration, published_calibration
from wanjax.domain.caching.registry import REGISTRY
from wanjax.domain.specs import TransformerSpec

POLICIES = ("none", *(name for name, policy in REGISTRY.items() if policy.chosen_by_name))
"""The values of cache_policy."""


class _CacheSettingsMethods:
    """The behaviour of `CacheSettings` (its fields are assembled from the registry below)."""

    policy: str
    model: str

    def __attrs_post_init__(self) -> None:
        published = self.published
        on = []
        for name, policy in REGISTRY.items():
            section = self.section(name)
            is_on = policy.is_on(self.policy, section)
            policy.check(section, published, on=is_on)
            on += [name] if is_on else []
        check_combination(on)

    @property
    def published(self) -> PublishedCalibration | None:
        """The calibration `model` names (None for `none`)."""
        return published_calibration(self.model)

    def section(self, name: str) -> Any:
        """Policy `name`'s settings section (validated when made)."""
        kind = REGISTRY[name].settings
        return kind(**{field.name: getattr(self, field.name) for field in attrs.fields(kind)})

    def check_model(self, transformer: TransformerSpec) -> None:
        """Refuses, before the model loads, a policy this request turns on that `transformer` cannot run."""
        for policy, section in self.policies_on():
            policy.check_model(section, transformer)

    def held(self) -> HeldState:
        """What the step caches this request turns on keep on the device from step to step."""
        return sum((policy.held(section) for policy, section in self.policies_on()), HeldState())

    def policies_on(self) -> list[tuple[CachePolicy, Any]]:
        """The policies this request turns on, each with its section."""
        sections = [(policy, self.section(name)) for name, policy in REGISTRY.items()]
        return [(policy, section) for policy, section in sections if policy.is_on(self.policy, section)]


def policy_keys(policy: str) -> tuple[str, ...]:
    """The keys of `policy`'s own settings section (none for `none`)."""
    return tuple(field.name for field in attrs.fields(REGISTRY[policy].settings)) if policy in REGISTRY else ()


def _flat_fields() -> dict[str, Any]:
    """policy, model, then every section's fields as they are declared (their validators run when
    the section is made)."""
    fields: dict[str, Any] = {
        "policy": attrs.field(
            default="none", validator=one_of("cache_policy", POLICIES), metadata={"key": "cache_policy"}
        ),
        "model": attrs.field(
            default="none", validator=one_of("cache_model", ("none", *PUBLISHED)), metadata={"key": "cache_model"}
        ),
    }
    for policy in REGISTRY.values():
        for field in attrs.fields(policy.settings):
            if field.name in fields:
                raise TypeError(f"cache setting {field.name!r} is declared by two sections; give it one owner")
            fields[field.name] = attrs.field(default=field.default, metadata=field.metadata, type=field.type)
    return fields


CacheSettings = attrs.make_class(
    "CacheSettings", _flat_fields(), bases=(_CacheSettingsMethods,), frozen=True, kw_only=True
)
CacheSettings.__doc__ = """One step-cache policy (`policy`: none, or a registered policy's name), the published
calibration to use (`model`), and every policy's parameters (docs/caching.md); the defaults are
the published ones, the policy `none`."""
CacheSettings.__module__ = __name__
