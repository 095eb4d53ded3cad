"""MagCache calibration: the residual magnitudes a dense run recorded -> a mag_ratios curve, and
the preset fragment that hands it to later runs (docs/caching.md, "MagCache")."""

from __future__ import annotations

from typing import ClassVar

import attrs
import numpy as np

from wanjax.domain.caching.policy import ChosenByName, RunSchedule
from wanjax.domain.caching.schedule import expert_segments
from wanjax.domain.errors import InvalidRequestError

DECIMALS = 5  # as the published curves
_NORM_FLOOR = 1e-8  # as diffusers' calibration: a zero residual must not divide by zero


@attrs.frozen(kw_only=True)
class CalibratedCurve:
    """A measured curve in the config's format: mag_ratios (cond, uncond interleaved, the first
    step padded with 1.0) and, for two experts, mag_ratios_split (the first low-noise step)."""

    mag_ratios: tuple[float, ...]
    mag_ratios_split: int | None

    def preset_fragment(self, title: str) -> str:
        """YAML lines for a preset (or `--set` values) that make later runs use this curve."""
        values = ", ".join(repr(v) for v in self.mag_ratios)
        lines = [f"# MagCache curve measured by magcache_calibration: {title}", f"mag_ratios: [{values}]"]
        if self.mag_ratios_split is not None:
            lines.append(f"mag_ratios_split: {self.mag_ratios_split}")
        return "\n".join(lines) + "\n"


def calibrate_curve(norms: np.ndarray, experts: np.ndarray) -> CalibratedCurve:
    """The curve from `norms` [S, P, T]: the per-token L2 norms of the block residual at each step,
    per pass (P = 2: cond, uncond; P = 1 without guidance, used for both halves of the curve).

    r_i = mean over tokens of norms[i] / norms[i - 1], r_0 = 1 (MagCache's magnitude ratio);
    `experts` [S] locates the split of a two-expert run.
    """
    norms = np.asarray(norms, dtype=np.float64)
    if norms.ndim != 3 or norms.shape[1] not in (1, 2) or norms.shape[0] != len(experts) or norms.shape[0] < 2:
        raise InvalidRequestError(
            f"calibration norms of shape {norms.shape}: expected [S, P, T] with S = {len(experts)} steps "
            "(at least 2) and P = 1 or 2 passes"
        )
    ratios = np.ones((norms.shape[0], 2))  # [S, 2]
    step_ratios = (norms[1:] / (norms[:-1] + _NORM_FLOOR)).mean(axis=2)  # [S - 1, P]
    ratios[1:] = step_ratios if norms.shape[1] == 2 else np.repeat(step_ratios, 2, axis=1)
    segments = expert_segments(experts)
    split = segments[1][0] if len(segments) == 2 else None
    return CalibratedCurve(mag_ratios=tuple(np.round(ratios.reshape(-1), DECIMALS).tolist()), mag_ratios_split=split)


@attrs.frozen(kw_only=True)
class CalibrationSettings:
    magcache_calibration: bool = False
    """Run dense and record the MagCache curve of this model, dtype and step count."""


@attrs.frozen(kw_only=True, eq=False)
class CalibrationPlan:
    """Run dense and record, per step, the residual magnitudes `calibrate_curve` takes."""

    feature: ClassVar[str] = "magcache_calibration"
    acts: ClassVar[bool] = True


class MagCacheCalibration(ChosenByName):
    """Not a cache_policy value: `magcache_calibration: true` turns it on (with cache_policy=none)."""

    name = "magcache_calibration"
    settings = CalibrationSettings
    chosen_by_name = False

    def is_on(self, policy: str, section: CalibrationSettings) -> bool:
        return section.magcache_calibration

    def plan(self, section: CalibrationSettings, run: RunSchedule) -> CalibrationPlan:
        return CalibrationPlan()


MAGCACHE_CALIBRATION = MagCacheCalibration()
