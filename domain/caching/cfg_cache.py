"""CFG cache (FasterCache, arXiv 2410.19355): which steps run the conditional pass only, and the
low/high-frequency weights of the unconditional estimate (docs/caching.md, "CFG cache")."""

from __future__ import annotations

from typing import ClassVar

import attrs
import numpy as np

from wanjax.domain.caching.checks import INF, at_least, in_range
from wanjax.domain.caching.policy import ChosenByName, HeldState, RunSchedule
from wanjax.domain.caching.schedule import expert_segments, step_fraction
from wanjax.domain.errors import InvalidRequestError


@attrs.frozen(kw_only=True)
class CfgCacheSettings:
    """The CFG cache's config keys (docs/caching.md, "CFG cache")."""

    cfg_cache_interval: int = attrs.field(default=5, validator=at_least(2))
    cfg_cache_start_ratio: float = attrs.field(default=0.3334, validator=in_range(0, 1))
    cfg_cache_end_ratio: float = attrs.field(default=0.9, validator=in_range(0, 1, low_open=True, high_open=False))
    cfg_cache_alpha: float = attrs.field(default=0.2, validator=in_range(0, INF))

    def __attrs_post_init__(self) -> None:
        if self.cfg_cache_start_ratio >= self.cfg_cache_end_ratio:
            raise InvalidRequestError(
                f"cfg_cache_start_ratio={self.cfg_cache_start_ratio!r} must be below "
                f"cfg_cache_end_ratio={self.cfg_cache_end_ratio!r}: the window would be empty"
            )


@attrs.frozen(kw_only=True, eq=False)
class CfgCachePlan:
    """cond_only [S] bool: run the conditional pass only and estimate the unconditional one from
    the cached difference; cfg_weights [S, 2] float32: the (low, high)-frequency weights of that
    estimate."""

    feature: ClassVar[str] = "cfg_cache"
    cond_only: np.ndarray
    cfg_weights: np.ndarray

    @property
    def acts(self) -> bool:
        return bool(self.cond_only.any())


def cond_only_steps(experts: np.ndarray, *, interval: int, start_ratio: float, end_ratio: float) -> np.ndarray:
    """[S] bool: inside [int(S * start_ratio), int(S * end_ratio)), every step but each
    `interval`-th runs cond-only, once a full step of the same expert came before it; with two
    experts the high-noise one never caches (maxdiffusion's Wan 2.2 schedule)."""
    num_steps = len(experts)
    start, end = step_fraction(num_steps, start_ratio), step_fraction(num_steps, end_ratio)
    cond_only = np.zeros(num_steps, dtype=bool)
    segments = expert_segments(experts)
    for index, (first, last) in enumerate(segments):
        if len(segments) == 2 and index == 0:
            continue
        seen_full = False
        for i in range(first, last):
            cond_only[i] = seen_full and start <= i < end and (i - start) % interval != 0
            seen_full = seen_full or not cond_only[i]
    return cond_only


def frequency_weights(experts: np.ndarray, alpha: float) -> np.ndarray:
    """[S, 2] float32 (w_low, w_high): (1 + alpha, 1) before the phase change, (1, 1 + alpha) from
    it on; the phase change is step S // 2 with one expert, the first low-noise step with two."""
    segments = expert_segments(experts)
    phase_change = segments[1][0] if len(segments) == 2 else len(experts) // 2
    late = np.arange(len(experts)) >= phase_change
    return np.stack([np.where(late, 1.0, 1.0 + alpha), np.where(late, 1.0 + alpha, 1.0)], axis=1).astype(np.float32)


class CfgCache(ChosenByName):
    """The CFG cache policy: needs classifier-free guidance on every step."""

    name = "cfg_cache"
    settings = CfgCacheSettings

    def held(self, section: CfgCacheSettings) -> HeldState:
        return HeldState(latent_arrays=1)  # the last full step's unconditional - conditional prediction

    def plan(self, section: CfgCacheSettings, run: RunSchedule) -> CfgCachePlan:
        scales = run.guidance_scales
        if not (run.uses_guidance and (scales > 1.0).all()):
            raise InvalidRequestError(
                f"cache_policy=cfg_cache caches the unconditional pass, but guidance is off on some steps "
                f"(guidance scales {sorted(set(scales.tolist()))}): set every guidance scale above 1 "
                "or choose another cache_policy"
            )
        cond_only = cond_only_steps(
            run.experts,
            interval=section.cfg_cache_interval,
            start_ratio=section.cfg_cache_start_ratio,
            end_ratio=section.cfg_cache_end_ratio,
        )
        return CfgCachePlan(cond_only=cond_only, cfg_weights=frequency_weights(run.experts, section.cfg_cache_alpha))


CFG_CACHE = CfgCache()
