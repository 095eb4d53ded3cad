"""MagCache (arXiv 2506.09045): which steps reuse the cached block residual, decided on the host
from a calibrated magnitude-ratio curve (docs/caching.md, "MagCache")."""

from __future__ import annotations

from typing import ClassVar

import attrs
import numpy as np

from wanjax.domain.caching.checks import INF, at_least, fail, in_range, optional_numbers, optional_split
from wanjax.domain.caching.policy import ChosenByName, HeldState, RunSchedule
from wanjax.domain.caching.published import PublishedCalibration
from wanjax.domain.caching.schedule import expert_segments, nearest_interp
from wanjax.domain.errors import InvalidRequestError


@attrs.frozen(kw_only=True)
class MagCacheSettings:
    """MagCache's config keys (docs/caching.md); mag_ratios and mag_ratios_split unset: the
    curve `cache_model` published."""

    magcache_thresh: float = attrs.field(default=0.12, validator=in_range(0, INF))
    magcache_K: int = attrs.field(default=2, validator=at_least(1))
    retention_ratio: float = attrs.field(default=0.2, validator=in_range(0, 1))
    mag_ratios: tuple[float, ...] | None = attrs.field(
        default=None, validator=optional_numbers(positive=True, even=True), metadata={"parse": tuple, "item": float}
    )
    """The calibrated magnitude-ratio curve, cond and uncond interleaved (maxdiffusion: mag_ratios_base)."""
    mag_ratios_split: int | None = attrs.field(default=None, validator=optional_split, metadata={"parse": int})
    """Wan 2.2 A14B: the curve's first low-noise step."""


def magcache_curve(
    settings: MagCacheSettings, published: PublishedCalibration | None
) -> tuple[tuple[float, ...] | None, int | None]:
    """(mag_ratios, mag_ratios_split) as given, else the published curve and split."""
    if settings.mag_ratios is not None or published is None or published.mag_ratios is None:
        return settings.mag_ratios, settings.mag_ratios_split
    return published.mag_ratios, settings.mag_ratios_split or published.mag_ratios_split


@attrs.frozen(kw_only=True, eq=False)
class MagCachePlan:
    """reuse_residual [S] bool: skip the transformer blocks and add the residual cached at the
    last computed step (patch embedding, time embedding and head still run)."""

    feature: ClassVar[str] = "magcache"
    reuse_residual: np.ndarray

    @property
    def acts(self) -> bool:
        return bool(self.reuse_residual.any())


def ratios_for_steps(mag_ratios: tuple[float, ...], split: int | None, experts: np.ndarray) -> np.ndarray:
    """The curve `mag_ratios` (cond, uncond interleaved) on the run's steps: [S, 2] (cond, uncond).

    Without `split` the whole curve is interpolated to S steps. With `split` (the curve's first
    low-noise step), its high-noise and low-noise segments are interpolated onto the run's own
    expert segments, so the curve's expert boundary lands on the run's.
    """
    curve = np.asarray(mag_ratios, dtype=np.float64).reshape(-1, 2)  # [n, 2]
    segments = expert_segments(experts)
    if split is None or len(segments) == 1:
        pieces, targets = [curve], [len(experts)]
    elif len(segments) == 2:
        pieces, targets = [curve[:split], curve[split:]], [end - start for start, end in segments]
    else:
        raise InvalidRequestError(f"MagCache expects at most two expert segments, got {len(segments)}")
    return np.concatenate(
        [np.stack([nearest_interp(piece[:, p], n) for p in range(2)], axis=1) for piece, n in zip(pieces, targets)]
    )


def magcache_reuse(
    ratios: np.ndarray, experts: np.ndarray, *, threshold: float, max_skips: int, retention_ratio: float
) -> np.ndarray:
    """[S] bool, True where the blocks are skipped: `ratios` [S, P] per pass, decided jointly.

    Per expert segment of n steps, the first int(retention_ratio * n + 0.5) steps compute; after
    that each pass accumulates ratio *= r, steps += 1, err += |1 - ratio|, and the step reuses
    iff a residual of this expert exists and, for every pass, err <= threshold and
    steps <= max_skips; otherwise it computes and every pass restarts (diffusers' hook rule).
    """
    reuse = np.zeros(len(experts), dtype=bool)
    for start, end in expert_segments(experts):
        retained = int(retention_ratio * (end - start) + 0.5)
        ratio = np.ones(ratios.shape[1])
        steps = np.zeros(ratios.shape[1], dtype=int)
        err = np.zeros(ratios.shape[1])
        for i in range(start + retained, end):
            ratio *= ratios[i]
            steps += 1
            err += np.abs(1.0 - ratio)
            if i > start and (err <= threshold).all() and (steps <= max_skips).all():
                reuse[i] = True
            else:
                ratio[:], steps[:], err[:] = 1.0, 0, 0.0
    return reuse


class MagCache(ChosenByName):
    """The MagCache policy: host-decided residual reuse; the cond curve alone without guidance."""

    name = "magcache"
    settings = MagCacheSettings

    def check(self, section: MagCacheSettings, published: PublishedCalibration | None, *, on: bool) -> None:
        ratios, split = magcache_curve(section, published)
        if split is not None and ratios is not None and split >= len(ratios) // 2:
            fail("mag_ratios_split", split, f"must be below the curve's {len(ratios) // 2} steps")
        if on and ratios is None:
            raise InvalidRequestError(
                "cache_policy=magcache needs mag_ratios: this model has no published MagCache curve; "
                "measure one with magcache_calibration=true (cache_policy=none) and set mag_ratios"
            )

    def held(self, section: MagCacheSettings) -> HeldState:
        return HeldState(token_arrays=1)  # the blocks' residual

    def plan(self, section: MagCacheSettings, run: RunSchedule) -> MagCachePlan:
        ratios = ratios_for_steps(*magcache_curve(section, run.published), run.experts)
        passes = ratios if run.uses_guidance else ratios[:, :1]
        reuse = magcache_reuse(
            passes,
            run.experts,
            threshold=section.magcache_thresh,
            max_skips=section.magcache_K,
            retention_ratio=section.retention_ratio,
        )
        return MagCachePlan(reuse_residual=reuse)


MAGCACHE = MagCache()
