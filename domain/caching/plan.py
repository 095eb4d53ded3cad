"""The cache plan: what each denoising step may skip, decided before the loop where the
decision depends on the schedule only, and handed to the device as a rule where it
depends on the data.

Every policy (MagCache, TeaCache, CFG cache, SenCache) becomes one `CachePlan`; the
denoiser's Python loop and its scan loop execute any plan with the same step function.
A dense plan (`CachePlan.dense`) computes everything.
"""

from __future__ import annotations

import attrs
import numpy as np


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


@attrs.frozen(kw_only=True)
class SenCacheRule:
    """Decided on device (SenCache): reuse the last guided prediction while
    alpha_x * |dx| + alpha_t * |dt| since the last computed step stays below `threshold`,
    at most `max_reuse` steps in a row."""

    threshold: float
    alpha_x: float
    alpha_t: float
    max_reuse: int


DeviceRule = TeaCacheRule | SenCacheRule


@attrs.frozen(kw_only=True, eq=False)
class CachePlan:
    """Per step i of S (numpy arrays; values only, so changing them never recompiles):

    reuse_residual [S] bool: skip the transformer blocks and add the residual cached at the
      last computed step (patch embedding, time embedding and head still run).
    cond_only [S] bool: run the conditional pass only and estimate the unconditional one from
      the cached difference (CFG cache).
    cfg_weights [S, 2] float32: the (low, high)-frequency weights of that estimate.
    force_compute [S] bool: steps a device rule must compute whatever it measures (first,
      last, expert boundary).
    rule: the on-device decision (TeaCache, SenCache), or None.
    calibrate: run dense and record the per-step residual magnitudes (MagCache calibration).
    policy: the policy that made the plan (docs/caching.md), for traces and messages.
    """

    reuse_residual: np.ndarray
    cond_only: np.ndarray
    cfg_weights: np.ndarray
    force_compute: np.ndarray
    rule: DeviceRule | None = None
    calibrate: bool = False
    policy: str = "none"

    @classmethod
    def dense(cls, num_steps: int) -> CachePlan:
        """Every step computes everything."""
        no = np.zeros(num_steps, dtype=bool)
        return cls(
            reuse_residual=no,
            cond_only=no,
            cfg_weights=np.zeros((num_steps, 2), np.float32),
            force_compute=np.ones(num_steps, dtype=bool),
        )

    @property
    def num_steps(self) -> int:
        return len(self.reuse_residual)

    @property
    def is_dense(self) -> bool:
        """Nothing can be skipped: the denoiser runs its plain step."""
        return not (self.reuse_residual.any() or self.cond_only.any() or self.rule is not None or self.calibrate)
