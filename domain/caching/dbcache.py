"""DBCache, cache-dit's Dual Block Cache (vipshop/cache-dit 1.5.3), with its TaylorSeer calibrator:
the first Fn blocks always run, and the change of their residual since the last computed step
decides, per guidance pass, whether the middle blocks run or their cached residual (or its
TaylorSeer forecast) stands in; the last Bn blocks always run. The decision depends on data, so
the plan carries a rule the device evaluates, plus the warm-up steps it must compute
(docs/caching.md, "DBCache").

The keys are cache-dit's own names and defaults (`DBCacheConfig`, `TaylorSeerCalibratorConfig`).
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np

from wanjax.domain.caching.checks import INF, at_least, fail, in_range
from wanjax.domain.caching.plan import RulePlan
from wanjax.domain.caching.policy import ChosenByName, HeldState, RunSchedule
from wanjax.domain.caching.schedule import expert_segments
from wanjax.domain.errors import InvalidRequestError
from wanjax.domain.extensions.registry import extensions_of
from wanjax.domain.specs import TransformerSpec


def _whole_number(_: Any, attribute: attrs.Attribute, value: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        fail(attribute.name, value, "must be an integer (negative, as in cache-dit: no warm-up, no limit)")


def _interval(_: Any, attribute: attrs.Attribute, value: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value == 0:
        fail(attribute.name, value, "must be a non-zero integer (the warm-up is range(0, max_warmup_steps, it))")


@attrs.frozen(kw_only=True)
class DBCacheSettings:
    """DBCache's config keys, cache-dit's `DBCacheConfig` fields and defaults, and TaylorSeer's
    (`enable_taylorseer`, `taylorseer_order`: cache-dit's `TaylorSeerCalibratorConfig`)."""

    Fn_compute_blocks: int = attrs.field(default=8, validator=at_least(1))
    Bn_compute_blocks: int = attrs.field(default=0, validator=at_least(0))
    residual_diff_threshold: float = attrs.field(default=0.08, validator=in_range(-INF, INF))
    max_warmup_steps: int = attrs.field(default=8, validator=_whole_number)
    warmup_interval: int = attrs.field(default=1, validator=_interval)
    max_cached_steps: int = attrs.field(default=-1, validator=_whole_number)
    max_continuous_cached_steps: int = attrs.field(default=-1, validator=_whole_number)
    enable_taylorseer: bool = False
    taylorseer_order: int = attrs.field(default=1, validator=at_least(0))


@attrs.frozen(kw_only=True)
class DBCacheRule:
    """Decided on device (DBCache), per guidance pass: after the first `first_blocks` blocks, the
    pass reuses the middle blocks' cached residual when the mean absolute change of its first
    blocks' residual since its last computed step, relative to that residual's mean magnitude,
    is below `threshold` (<= 0: never; >= 1: always), it has reused fewer than `max_cached`
    steps (negative: no limit) and fewer than `max_continuous` in a row (negative: no limit);
    the last `last_blocks` blocks always run. `taylorseer_order`: None, the residual of the last
    computed step stands in; k, its TaylorSeer forecast of order k. docs/caching.md, "DBCache",
    has the per-step formulas."""

    first_blocks: int
    last_blocks: int
    threshold: float
    max_cached: int
    max_continuous: int
    taylorseer_order: int | None = None


class DBCachePlan(RulePlan):
    """rule: a `DBCacheRule`; force_compute: each expert's warm-up steps."""

    feature = "dbcache"


def warmup_steps(experts: np.ndarray, *, max_warmup_steps: int, warmup_interval: int) -> np.ndarray:
    """[S] bool: the steps DBCache computes whatever it measures. cache-dit keeps one context per
    transformer (Wan 2.2 A14B: one per expert), whose steps count from that expert's first step;
    its warm-up steps are range(0, max_warmup_steps, warmup_interval) of them, and the first step
    of each (no residual measured yet to compare with) computes too."""
    forced = np.zeros(len(experts), dtype=bool)
    for start, end in expert_segments(experts):
        forced[start] = True
        for k in range(0, max_warmup_steps, warmup_interval):
            if start + k < end:
                forced[start + k] = True
    return forced


class DBCache(ChosenByName):
    """The DBCache policy: its first and last blocks must exist in the model."""

    name = "dbcache"
    settings = DBCacheSettings

    def check_model(self, section: DBCacheSettings, transformer: TransformerSpec) -> None:
        layers = transformer.num_layers
        for key in ("Fn_compute_blocks", "Bn_compute_blocks"):
            if getattr(section, key) > layers:
                raise InvalidRequestError(
                    f"{key}={getattr(section, key)}: this transformer has {layers} blocks; "
                    f"choose at most {layers} (cache-dit's limit)"
                )
        whole = [extension.name for extension in extensions_of(transformer) if extension.whole_blocks_only]
        if whole:
            raise InvalidRequestError(
                f"cache_policy=dbcache runs the blocks in three ranges, and this model's {', '.join(whole)} "
                "blocks read the tokens entering its first block: choose another cache_policy for it"
            )

    def held(self, section: DBCacheSettings) -> HeldState:
        # the first blocks' residual, and the middle blocks' residual with TaylorSeer's differences
        order = section.taylorseer_order if section.enable_taylorseer else 0
        return HeldState(token_arrays=2 + order)

    def plan(self, section: DBCacheSettings, run: RunSchedule) -> DBCachePlan:
        rule = DBCacheRule(
            first_blocks=section.Fn_compute_blocks,
            last_blocks=section.Bn_compute_blocks,
            threshold=section.residual_diff_threshold,
            max_cached=section.max_cached_steps,
            max_continuous=section.max_continuous_cached_steps,
            taylorseer_order=section.taylorseer_order if section.enable_taylorseer else None,
        )
        forced = warmup_steps(
            run.experts, max_warmup_steps=section.max_warmup_steps, warmup_interval=section.warmup_interval
        )
        return DBCachePlan(rule=rule, force_compute=forced)


DBCACHE = DBCache()
