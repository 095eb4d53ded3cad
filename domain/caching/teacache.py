"""TeaCache (arXiv 2411.19108): the decision depends on data, so the plan carries a rule the
device evaluates, plus the steps it must compute whatever it measures (docs/caching.md, "TeaCache")."""

from __future__ import annotations

import attrs
import numpy as np

from wanjax.domain.caching.checks import INF, in_range, optional_numbers
from wanjax.domain.caching.plan import RulePlan
from wanjax.domain.caching.policy import ChosenByName, HeldState, RunSchedule
from wanjax.domain.caching.published import PublishedCalibration
from wanjax.domain.caching.schedule import first_steps
from wanjax.domain.errors import InvalidRequestError

TEACACHE_RET_STEPS = 5
"""TeaCache4Wan2.1 with use_ret_steps: the first 5 steps (10 passes) always compute."""


@attrs.frozen(kw_only=True)
class TeaCacheSettings:
    """TeaCache's config keys; teacache_coefficients unset: the polynomial `cache_model` published."""

    teacache_thresh: float = attrs.field(default=0.2, validator=in_range(0, INF))
    teacache_use_ret_steps: bool = True
    teacache_coefficients: tuple[float, ...] | None = attrs.field(
        default=None, validator=optional_numbers(positive=False), metadata={"parse": tuple, "item": float}
    )


def teacache_polynomial(settings: TeaCacheSettings, published: PublishedCalibration | None) -> tuple[float, ...] | None:
    """teacache_coefficients as given, else the published polynomial for teacache_use_ret_steps."""
    if settings.teacache_coefficients is not None or published is None:
        return settings.teacache_coefficients
    return published.teacache_coefficients(settings.teacache_use_ret_steps)


@attrs.frozen(kw_only=True)
class TeaCacheRule:
    """Decided on device (TeaCache): reuse the cached block residual while the accumulated,
    polynomially rescaled relative L1 change of the timestep-modulated input stays below
    `threshold`; conditional and unconditional rows keep separate accumulators.

    coefficients: the rescaling polynomial, highest power first (numpy.polyval order).
    input_is_modulation: True: the compared input is the projected timestep modulation e0
      [B, 6, D] (the coefficients of TeaCache's `use_ret_steps` fit); False: the timestep
      embedding e [B, D]. docs/caching.md, "Device semantics", has the per-step formula.
    """

    threshold: float
    coefficients: tuple[float, ...]
    input_is_modulation: bool = True


class TeaCachePlan(RulePlan):
    """rule: a `TeaCacheRule`; force_compute: the steps it must compute whatever it measures."""

    feature = "teacache"


def teacache_forced(experts: np.ndarray, *, use_ret_steps: bool) -> np.ndarray:
    """[S] bool: steps TeaCache computes whatever it measures. With use_ret_steps the first
    TEACACHE_RET_STEPS; without, the first and the last step (TeaCache4Wan2.1's cutoff); and
    the first step of each expert."""
    forced = first_steps(experts)
    if use_ret_steps:
        forced[:TEACACHE_RET_STEPS] = True
    else:
        forced[[0, -1]] = True
    return forced


class TeaCache(ChosenByName):
    """The TeaCache policy: needs a polynomial, given or published."""

    name = "teacache"
    settings = TeaCacheSettings

    def check(self, section: TeaCacheSettings, published: PublishedCalibration | None, *, on: bool) -> None:
        if on and teacache_polynomial(section, published) is None:
            raise InvalidRequestError(
                "cache_policy=teacache needs teacache_coefficients: this model has no published TeaCache "
                "polynomial; give one (highest power first) or choose cache_policy=magcache"
            )

    def held(self, section: TeaCacheSettings) -> HeldState:
        # the blocks' residual, and the last step's modulation: e0 [6, width] or e [width] per time token
        return HeldState(token_arrays=1, time_token_widths=6 if section.teacache_use_ret_steps else 1)

    def plan(self, section: TeaCacheSettings, run: RunSchedule) -> TeaCachePlan:
        rule = TeaCacheRule(
            threshold=section.teacache_thresh,
            coefficients=teacache_polynomial(section, run.published),
            input_is_modulation=section.teacache_use_ret_steps,
        )
        forced = teacache_forced(run.experts, use_ret_steps=section.teacache_use_ret_steps)
        return TeaCachePlan(rule=rule, force_compute=forced)


TEACACHE = TeaCache()
