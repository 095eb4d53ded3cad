"""Few-step distilled sampling: flow-match Euler on an explicit list of training timesteps.

Step-distilled Wan models (LightX2V's StepDistill-CfgDistill LoRAs for Wan 2.1, the
Wan2.2-Lightning LoRAs) were trained to visit a fixed list of training timesteps, e.g.
1000, 750, 500, 250. Each t becomes sigma = shift_sigmas(t / 1000, shift); the
transformer sees the shifted timestep sigma * 1000 (1000, 937.5, 833.3, 625 at shift 5),
and each step is an Euler move to the next sigma, the last one to sigma = 0 (which is
the data prediction x - sigma * v).

Sources for that recipe: Wan2.2-Lightning's `EulerScheduler` (np.linspace(1000, 0, S + 1)
shifted, `x + (sigma_next - sigma) * v`) and LightX2V's `WanStepDistillScheduler`
(`denoising_step_list` indexed into the shifted 1000-point grid). The arithmetic here is
that of diffusers' FlowMatchEulerDiscreteScheduler(shift=shift).set_timesteps(sigmas=t/1000)
in float32, so it equals that scheduler exactly; the two recipes above agree with it to
one float32 ulp. (LightX2V's Wan 2.1 runner re-noises x0 with fresh Gaussian noise at the
next sigma instead of stepping deterministically: LCM-style; that variant is not built.)
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import DTypeLike

from wanjax.domain.errors import InvalidRequestError
from wanjax.domain.numbers import shown
from wanjax.domain.scheduling.euler import euler_table_on
from wanjax.domain.scheduling.flow_sigmas import MAX_INFERENCE_STEPS, NUM_TRAIN_TIMESTEPS, FlowSchedule, shift_sigmas
from wanjax.domain.scheduling.solver import SolverTable


def checked_timesteps(timesteps: Sequence[float]) -> tuple[float, ...]:
    """The list as floats; InvalidRequestError unless it is strictly decreasing in (0, 1000], with at
    most MAX_INFERENCE_STEPS entries."""
    try:
        items = () if isinstance(timesteps, str) else tuple(timesteps)
        values = tuple(float(t) for t in items if not isinstance(t, bool))
    except (TypeError, ValueError, OverflowError):  # OverflowError: an int past a float's range
        items, values = (), ()
    valid = (
        0 < len(values) == len(items) <= MAX_INFERENCE_STEPS
        and all(math.isfinite(t) and 0 < t <= NUM_TRAIN_TIMESTEPS for t in values)
        and all(a > b for a, b in zip(values, values[1:]))
    )
    if not valid:
        raise InvalidRequestError(
            f"sample_timesteps={shown(timesteps)}: must be 1 to {MAX_INFERENCE_STEPS} training timesteps in "
            f"(0, {NUM_TRAIN_TIMESTEPS}], strictly decreasing, e.g. 1000,750,500,250"
        )
    return values


def few_step_schedule(timesteps: Sequence[float], shift: float) -> FlowSchedule:
    """The grid of an explicit timestep list: sigma = shift(t / 1000) in float32, then 0."""
    values = checked_timesteps(timesteps)
    if isinstance(shift, bool) or not isinstance(shift, (int, float)) or not math.isfinite(shift) or shift <= 0:
        raise InvalidRequestError(f"shift (flow_shift) must be a finite number > 0, got {shift!r}")
    base = np.array([t / NUM_TRAIN_TIMESTEPS for t in values]).astype(np.float32)
    sigmas = shift_sigmas(base, float(shift))  # float32: a Python float does not promote
    return FlowSchedule(
        timesteps=sigmas * np.float32(NUM_TRAIN_TIMESTEPS),
        sigmas=np.append(sigmas, np.float32(0.0)),
    )


def few_step_euler_table(
    timesteps: Sequence[float], shift: float, *, dtype: DTypeLike = np.float32
) -> SolverTable:
    """Euler over `few_step_schedule(timesteps, shift)`: one model evaluation per timestep."""
    return euler_table_on(few_step_schedule(timesteps, shift), dtype=dtype)
