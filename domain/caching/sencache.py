"""SenCache (arXiv 2602.24208): the decision depends on data, so the plan carries a rule the
device evaluates, plus the steps it must compute whatever it measures (docs/caching.md, "SenCache")."""

from __future__ import annotations

import attrs
import numpy as np

from wanjax.domain.caching.checks import INF, at_least, in_range
from wanjax.domain.caching.plan import RulePlan
from wanjax.domain.caching.policy import ChosenByName, HeldState, RunSchedule
from wanjax.domain.caching.schedule import first_steps, step_fraction
from wanjax.domain.errors import InvalidRequestError


@attrs.frozen(kw_only=True)
class SenCacheSettings:
    """SenCache's config keys (maxdiffusion's defaults)."""

    sencache_thresh: float = attrs.field(default=0.1, validator=in_range(0, INF))
    sencache_alpha_x: float = attrs.field(default=1.0, validator=in_range(0, INF))
    sencache_alpha_t: float = attrs.field(default=1.0, validator=in_range(0, INF))
    sencache_K: int = attrs.field(default=3, validator=at_least(1))
    sencache_start_ratio: float = attrs.field(default=0.3, validator=in_range(0, 1))
    sencache_end_ratio: float = attrs.field(default=0.1, validator=in_range(0, 1))

    def __attrs_post_init__(self) -> None:
        if self.sencache_start_ratio + self.sencache_end_ratio >= 1:
            raise InvalidRequestError(
                f"sencache_start_ratio + sencache_end_ratio = {self.sencache_start_ratio + self.sencache_end_ratio!r}: "
                "the forced zones would cover every step; their sum must be below 1"
            )


@attrs.frozen(kw_only=True)
class SenCacheRule:
    """Decided on device (SenCache): reuse the last guided prediction while
    alpha_x * |dx| + alpha_t * |dt| since the last computed step stays below `threshold`,
    at most `max_reuse` steps in a row."""

    threshold: float
    alpha_x: float
    alpha_t: float
    max_reuse: int


class SenCachePlan(RulePlan):
    """rule: a `SenCacheRule`; force_compute: the steps it must compute whatever it measures."""

    feature = "sencache"


def sencache_forced(experts: np.ndarray, *, start_ratio: float, end_ratio: float) -> np.ndarray:
    """[S] bool: steps SenCache computes whatever it measures: step 0, the first
    int(S * start_ratio), those from int(S * (1 - end_ratio)) on, the first of each expert."""
    num_steps = len(experts)
    forced = first_steps(experts)
    forced[: step_fraction(num_steps, start_ratio)] = True
    forced[step_fraction(num_steps, 1.0 - end_ratio) :] = True
    return forced


class SenCache(ChosenByName):
    name = "sencache"
    settings = SenCacheSettings

    def held(self, section: SenCacheSettings) -> HeldState:
        return HeldState(latent_arrays=2)  # the reused prediction and the latents it was made at

    def plan(self, section: SenCacheSettings, run: RunSchedule) -> SenCachePlan:
        rule = SenCacheRule(
            threshold=section.sencache_thresh,
            alpha_x=section.sencache_alpha_x,
            alpha_t=section.sencache_alpha_t,
            max_reuse=section.sencache_K,
        )
        forced = sencache_forced(
            run.experts, start_ratio=section.sencache_start_ratio, end_ratio=section.sencache_end_ratio
        )
        return SenCachePlan(rule=rule, force_compute=forced)


SENCACHE = SenCache()
