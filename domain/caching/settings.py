"""What a request asks of step caching: one policy and its parameters, validated on construction.

The keys are the config keys of docs/caching.md; `resolve_cache_settings` fills a preset's
published calibration (MagCache curve, TeaCache polynomial) in where the config gives none.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import attrs

from wanjax.domain.caching.published import published_calibration
from wanjax.domain.errors import InvalidRequestError

POLICIES = ("none", "magcache", "teacache", "cfg_cache", "sencache")


def _fail(name: str, value: Any, fix: str) -> None:
    raise InvalidRequestError(f"{name}={value!r}: {fix}")


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _in_range(low: float, high: float, *, low_open: bool = False, high_open: bool = True):
    def check(_: Any, attribute: attrs.Attribute, value: float) -> None:
        above = value > low if low_open else value >= low
        below = value < high if high_open else value <= high
        if not (_is_number(value) and above and below):
            left, right = "(" if low_open else "[", ")" if high_open else "]"
            _fail(attribute.name, value, f"must be a number in {left}{low}, {high}{right}")

    return check


def _at_least(minimum: int):
    def check(_: Any, attribute: attrs.Attribute, value: int) -> None:
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            _fail(attribute.name, value, f"must be an integer >= {minimum}")

    return check


def _policy(_: Any, attribute: attrs.Attribute, value: str) -> None:
    if value not in POLICIES:
        _fail("cache_policy", value, f"must be one of {', '.join(POLICIES)}")


def _optional_numbers(*, positive: bool, even: bool = False):
    def check(_: Any, attribute: attrs.Attribute, value: tuple[float, ...] | None) -> None:
        if value is None:
            return
        if not value or not all(_is_number(v) and (v > 0 or not positive) for v in value):
            kind = "positive numbers" if positive else "numbers"
            _fail(attribute.name, value, f"must be a non-empty list of finite {kind}, or unset")
        if even and len(value) % 2:
            _fail(attribute.name, f"<{len(value)} values>", "must interleave cond and uncond ratios (an even count)")

    return check


def _optional_split(_: Any, attribute: attrs.Attribute, value: int | None) -> None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
        _fail(attribute.name, value, "must be a step index >= 1 (the curve's first low-noise step), or unset")


INF = math.inf


@attrs.frozen(kw_only=True)
class CacheSettings:
    """One step-cache policy and every parameter of every policy (docs/caching.md); the
    defaults are the published ones, the policy `none`."""

    policy: str = attrs.field(default="none", validator=_policy)
    magcache_thresh: float = attrs.field(default=0.12, validator=_in_range(0, INF))
    magcache_K: int = attrs.field(default=2, validator=_at_least(1))
    retention_ratio: float = attrs.field(default=0.2, validator=_in_range(0, 1))
    mag_ratios: tuple[float, ...] | None = attrs.field(
        default=None, validator=_optional_numbers(positive=True, even=True)
    )
    """The calibrated magnitude-ratio curve, cond and uncond interleaved."""
    mag_ratios_split: int | None = attrs.field(default=None, validator=_optional_split)
    """Wan 2.2 A14B: the curve's first low-noise step."""
    magcache_calibration: bool = False
    teacache_thresh: float = attrs.field(default=0.2, validator=_in_range(0, INF))
    teacache_use_ret_steps: bool = True
    teacache_coefficients: tuple[float, ...] | None = attrs.field(
        default=None, validator=_optional_numbers(positive=False)
    )
    cfg_cache_interval: int = attrs.field(default=5, validator=_at_least(2))
    cfg_cache_start_ratio: float = attrs.field(default=0.3334, validator=_in_range(0, 1))
    cfg_cache_end_ratio: float = attrs.field(default=0.9, validator=_in_range(0, 1, low_open=True, high_open=False))
    cfg_cache_alpha: float = attrs.field(default=0.2, validator=_in_range(0, INF))
    sencache_thresh: float = attrs.field(default=0.1, validator=_in_range(0, INF))
    sencache_alpha_x: float = attrs.field(default=1.0, validator=_in_range(0, INF))
    sencache_alpha_t: float = attrs.field(default=1.0, validator=_in_range(0, INF))
    sencache_K: int = attrs.field(default=3, validator=_at_least(1))
    sencache_start_ratio: float = attrs.field(default=0.3, validator=_in_range(0, 1))
    sencache_end_ratio: float = attrs.field(default=0.1, validator=_in_range(0, 1))

    def __attrs_post_init__(self) -> None:
        if self.magcache_calibration and self.policy != "none":
            raise InvalidRequestError(
                f"magcache_calibration=true runs dense to measure the curve; it cannot run with "
                f"cache_policy={self.policy}: set cache_policy=none"
            )
        if self.mag_ratios_split is not None and self.mag_ratios is not None:
            curve_steps = len(self.mag_ratios) // 2
            if self.mag_ratios_split >= curve_steps:
                _fail("mag_ratios_split", self.mag_ratios_split, f"must be below the curve's {curve_steps} steps")
        if self.policy == "magcache" and self.mag_ratios is None:
            raise InvalidRequestError(
                "cache_policy=magcache needs mag_ratios: this model has no published MagCache curve; "
                "measure one with magcache_calibration=true (cache_policy=none) and set mag_ratios"
            )
        if self.policy == "teacache" and self.teacache_coefficients is None:
            raise InvalidRequestError(
                "cache_policy=teacache needs teacache_coefficients: this model has no published TeaCache "
                "polynomial; give one (highest power first) or choose cache_policy=magcache"
            )
        if self.cfg_cache_start_ratio >= self.cfg_cache_end_ratio:
            raise InvalidRequestError(
                f"cfg_cache_start_ratio={self.cfg_cache_start_ratio!r} must be below "
                f"cfg_cache_end_ratio={self.cfg_cache_end_ratio!r}: the window would be empty"
            )
        if self.sencache_start_ratio + self.sencache_end_ratio >= 1:
            raise InvalidRequestError(
                f"sencache_start_ratio + sencache_end_ratio = {self.sencache_start_ratio + self.sencache_end_ratio!r}: "
                "the forced zones would cover every step; their sum must be below 1"
            )


CONFIG_KEYS = ("cache_policy", "cache_model", *(f.name for f in attrs.fields(CacheSettings) if f.name != "policy"))
"""The config keys that make up a CacheSettings (cache_model names the published calibration)."""


def resolve_cache_settings(values: Mapping[str, Any]) -> CacheSettings:
    """CacheSettings from config `values` (every key of CONFIG_KEYS); the published calibration of
    `cache_model` fills mag_ratios, mag_ratios_split and teacache_coefficients where they are unset."""
    fields = {k: v for k, v in values.items() if k not in ("cache_policy", "cache_model")}
    published = published_calibration(values["cache_model"])
    if published is not None:
        if fields["mag_ratios"] is None and published.mag_ratios is not None:
            fields["mag_ratios"] = published.mag_ratios
            fields["mag_ratios_split"] = fields["mag_ratios_split"] or published.mag_ratios_split
        if fields["teacache_coefficients"] is None:
            fields["teacache_coefficients"] = published.teacache_coefficients(fields["teacache_use_ret_steps"])
    return CacheSettings(policy=values["cache_policy"], **fields)
