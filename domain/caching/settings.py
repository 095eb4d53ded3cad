"""What a request asks of step caching: one policy and its parameters, validated on construction.

The fields are the config keys of docs/caching.md (`policy` is `cache_policy`, `model` is
`cache_model`); `model`'s published calibration (MagCache curve, TeaCache polynomial) stands in
where the settings give none.
"""

from __future__ import annotations

import math
from typing import Any

import attrs

from wanjax.domain.caching.published import PUBLISHED, PublishedCalibration, published_calibration
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


def _one_of(key: str, allowed: tuple[str, ...]):
    def check(_: Any, attribute: attrs.Attribute, value: str) -> None:
        if value not in allowed:
            _fail(key, value, f"must be one of {', '.join(allowed)}")

    return check


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

    policy: str = attrs.field(
        default="none", validator=_one_of("cache_policy", POLICIES), metadata={"key": "cache_policy"}
    )
    """The step cache: none, magcache, teacache, cfg_cache or sencache (one at a time)."""
    model: str = attrs.field(
        default="none", validator=_one_of("cache_model", ("none", *PUBLISHED)), metadata={"key": "cache_model"}
    )
    """Whose published calibration (MagCache curve, TeaCache polynomial) stands in for mag_ratios,
    mag_ratios_split and teacache_coefficients when they are unset."""
    magcache_thresh: float = attrs.field(default=0.12, validator=_in_range(0, INF))
    magcache_K: int = attrs.field(default=2, validator=_at_least(1))
    retention_ratio: float = attrs.field(default=0.2, validator=_in_range(0, 1))
    mag_ratios: tuple[float, ...] | None = attrs.field(
        default=None, validator=_optional_numbers(positive=True, even=True), metadata={"parse": tuple, "item": float}
    )
    """The calibrated magnitude-ratio curve, cond and uncond interleaved (maxdiffusion: mag_ratios_base)."""
    mag_ratios_split: int | None = attrs.field(default=None, validator=_optional_split, metadata={"parse": int})
    """Wan 2.2 A14B: the curve's first low-noise step."""
    magcache_calibration: bool = False
    """Run dense and record the MagCache curve of this model, dtype and step count."""
    teacache_thresh: float = attrs.field(default=0.2, validator=_in_range(0, INF))
    teacache_use_ret_steps: bool = True
    teacache_coefficients: tuple[float, ...] | None = attrs.field(
        default=None, validator=_optional_numbers(positive=False), metadata={"parse": tuple, "item": float}
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
        ratios, split = self.magcache_curve
        if split is not None and ratios is not None and split >= len(ratios) // 2:
            _fail("mag_ratios_split", split, f"must be below the curve's {len(ratios) // 2} steps")
        if self.policy == "magcache" and ratios is None:
            raise InvalidRequestError(
                "cache_policy=magcache needs mag_ratios: this model has no published MagCache curve; "
                "measure one with magcache_calibration=true (cache_policy=none) and set mag_ratios"
            )
        if self.policy == "teacache" and self.teacache_polynomial is None:
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

    @property
    def _published(self) -> PublishedCalibration | None:
        return published_calibration(self.model)

    @property
    def magcache_curve(self) -> tuple[tuple[float, ...] | None, int | None]:
        """(mag_ratios, mag_ratios_split) as given, else `model`'s published curve and split."""
        if self.mag_ratios is not None or self._published is None or self._published.mag_ratios is None:
            return self.mag_ratios, self.mag_ratios_split
        return self._published.mag_ratios, self.mag_ratios_split or self._published.mag_ratios_split

    @property
    def teacache_polynomial(self) -> tuple[float, ...] | None:
        """teacache_coefficients as given, else `model`'s published polynomial for teacache_use_ret_steps."""
        if self.teacache_coefficients is not None or self._published is None:
            return self.teacache_coefficients
        return self._published.teacache_coefficients(self.teacache_use_ret_steps)
