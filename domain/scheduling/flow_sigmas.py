"""Shifted flow-matching schedules: the timesteps and sigmas of each Wan sampler.

A flow-matching model at noise level sigma sees x = (1 - sigma) * x0 + sigma * noise and
predicts the velocity noise - x0. Wan samples on a grid pushed towards sigma = 1 by
`shift_sigmas`. Each reference builds that grid its own way (docs/sampling.md):

- the Wan code's UniPC (`FlowUniPCMultistepScheduler`, and diffusers <= 0.36): N sigmas
  evenly spaced on [0.999, 0) (its float32 training grid's ends), then shifted;
- the Wan code's DPM-Solver++ (`get_sampling_sigmas`): evenly spaced on [1, 0), shifted;
- diffusers >= 0.37's UniPC in flow mode: evenly spaced on [1, 1/1000), shifted;
- diffusers' FlowMatchEulerDiscrete: see `euler_flow_schedule`.

The transformer is conditioned on their exact timestep values (the first three truncate
them to integers, Euler keeps floats), so each builder here repeats its reference's
arithmetic in the same dtype and order: a reordered formula would move an integer
timestep across a truncation boundary.
"""

from __future__ import annotations

import math

import attrs
import numpy as np

from wanjax.domain.errors import InvalidRequestError

NUM_TRAIN_TIMESTEPS = 1000
"""Length of the training noise grid; timestep = sigma * NUM_TRAIN_TIMESTEPS."""
MAX_INFERENCE_STEPS = NUM_TRAIN_TIMESTEPS
"""The most steps a request may take: one per training timestep (published recipes use 4 to 50)."""

SIGMA_SCHEDULES = ("official", "diffusers")
"""The UniPC grids: the Wan code's (`official`) and diffusers >= 0.37's (`diffusers`)."""

OFFICIAL_SIGMA_MAX = float(np.float32(1.0 - 1.0 / NUM_TRAIN_TIMESTEPS))
"""The noisiest sigma of the Wan code's 1000-step training grid, held in float32 (0.99900001)."""

_DIFFUSERS_FIRST_SIGMA_NUDGE = 1e-6
"""Diffusers' UniPC lowers a first sigma of exactly 1 by this much, keeping its log-SNR finite."""


def frozen_array(array: np.ndarray) -> np.ndarray:
    """A read-only copy, so that a frozen attrs holder of arrays is frozen all the way down."""
    array = np.array(array)
    array.setflags(write=False)
    return array


@attrs.frozen(eq=False)
class FlowSchedule:
    """The noise grid of one sampling run of `num_steps` model evaluations."""

    timesteps: np.ndarray = attrs.field(converter=frozen_array)
    """[S] float32: the timestep the transformer receives at step i."""
    sigmas: np.ndarray = attrs.field(converter=frozen_array)
    """[S + 1] float32: the noise level before step i; sigmas[S] == 0 (clean)."""

    def __attrs_post_init__(self) -> None:
        if self.timesteps.ndim != 1 or self.sigmas.shape != (self.timesteps.shape[0] + 1,):
            raise ValueError(
                f"a schedule needs timesteps [S] and sigmas [S + 1], got "
                f"{self.timesteps.shape} and {self.sigmas.shape}"
            )

    @property
    def num_steps(self) -> int:
        return int(self.timesteps.shape[0])

    def from_step(self, first: int) -> FlowSchedule:
        """The same grid run from step `first` on (video-to-video): its timesteps and sigmas
        from index `first`, the final 0 kept."""
        if not 0 <= first < self.num_steps:
            raise InvalidRequestError(f"a run of {self.num_steps} steps has no step {first} to start from")
        return FlowSchedule(timesteps=self.timesteps[first:], sigmas=self.sigmas[first:])


def _validate_steps_and_shift(num_steps: int, shift: float) -> None:
    """Raise InvalidRequestError unless num_steps is an integer >= 1 and shift a finite > 0."""
    if isinstance(num_steps, bool) or not isinstance(num_steps, (int, np.integer)) or num_steps < 1:
        raise InvalidRequestError(f"num_steps must be an integer >= 1, got {num_steps!r}")
    if (
        isinstance(shift, bool)
        or not isinstance(shift, (int, float, np.integer, np.floating))
        or not math.isfinite(shift)
        or shift <= 0
    ):
        raise InvalidRequestError(f"shift (flow_shift) must be a finite number > 0, got {shift!r}")


def shift_sigmas(sigmas: np.ndarray, shift: float) -> np.ndarray:
    """Map sigma to shift * sigma / (1 + (shift - 1) * sigma), computed in sigmas' dtype.

    shift > 1 spends more steps at high noise, which large frames need; sigma = 0 and 1 stay.
    """
    return shift * sigmas / (1 + (shift - 1) * sigmas)


def log_snr(sigmas: np.ndarray) -> np.ndarray:
    """lambda = log((1 - sigma) / sigma); sigma = 0 gives +inf and sigma = 1 gives -inf.

    The infinities are what the solvers' formulas need there: e^-h is exactly 0 on a step
    to sigma = 0 or from sigma = 1, and a divided difference over such a step vanishes.
    """
    with np.errstate(divide="ignore"):
        return np.log1p(-sigmas) - np.log(sigmas)


def _shifted_spacing(start: float, stop: float, num_steps: int, shift: float) -> np.ndarray:
    """num_steps sigmas evenly spaced on [start, stop) in float64, then shifted (float64)."""
    _validate_steps_and_shift(num_steps, shift)
    return shift_sigmas(np.linspace(start, stop, num_steps + 1)[:-1], float(shift))


def _integer_timestep_schedule(sigmas: np.ndarray) -> FlowSchedule:
    """Timesteps sigma * 1000 (float64) truncated to integers; sigmas in float32, then 0."""
    timesteps = (sigmas * NUM_TRAIN_TIMESTEPS).astype(np.int64)
    return FlowSchedule(
        timesteps=timesteps.astype(np.float32),
        sigmas=np.append(sigmas, 0.0).astype(np.float32),
    )


def unipc_flow_schedule(num_steps: int, shift: float, sigma_schedule: str = "official") -> FlowSchedule:
    """The UniPC grid of `sigma_schedule`, one of SIGMA_SCHEDULES.

    official: the Wan code's FlowUniPCMultistepScheduler(shift=1).set_timesteps(N, shift=shift),
    num_steps sigmas evenly spaced on [OFFICIAL_SIGMA_MAX, 0). diffusers: diffusers >= 0.37's
    UniPCMultistepScheduler(use_flow_sigmas=True, flow_shift=shift), evenly spaced on
    [1, 1/1000), a first sigma of 1 nudged down. Both shift in float64 and truncate the
    timesteps to integers.
    """
    if sigma_schedule == "official":
        return _integer_timestep_schedule(_shifted_spacing(OFFICIAL_SIGMA_MAX, 0.0, num_steps, shift))
    if sigma_schedule == "diffusers":
        sigmas = _shifted_spacing(1.0, 1.0 / NUM_TRAIN_TIMESTEPS, num_steps, shift)
        if abs(sigmas[0] - 1.0) < _DIFFUSERS_FIRST_SIGMA_NUDGE:
            sigmas[0] -= _DIFFUSERS_FIRST_SIGMA_NUDGE
        return _integer_timestep_schedule(sigmas)
    raise InvalidRequestError(
        f"sigma_schedule={sigma_schedule!r}: must be one of {', '.join(SIGMA_SCHEDULES)}"
    )


def dpm_flow_schedule(num_steps: int, shift: float) -> FlowSchedule:
    """The grid of the Wan code's DPM-Solver++: `get_sampling_sigmas(N, shift)` given as sigmas
    to FlowDPMSolverMultistepScheduler(shift=1), whose own shift by 1 leaves them unchanged.

    num_steps sigmas evenly spaced on [1, 0) and shifted, in float64; the first is exactly 1
    (timestep 1000); timesteps truncated to integers.
    """
    return _integer_timestep_schedule(_shifted_spacing(1.0, 0.0, num_steps, shift))


def euler_flow_schedule(num_steps: int, shift: float) -> FlowSchedule:
    """The grid of diffusers' FlowMatchEulerDiscreteScheduler(shift=shift), static shift.

    That scheduler shifts its float32 training grid once at construction, spaces
    num_steps timesteps evenly between the shifted ends (float64), and shifts again: the
    low end is shifted twice. Sigmas are float32 and timesteps are float32 sigma * 1000.
    """
    _validate_steps_and_shift(num_steps, shift)
    training_ends = np.array([NUM_TRAIN_TIMESTEPS, 1], dtype=np.float32) / np.float32(
        NUM_TRAIN_TIMESTEPS
    )
    sigma_max, sigma_min = (float(s) for s in shift_sigmas(training_ends, float(shift)))
    spaced = np.linspace(
        sigma_max * NUM_TRAIN_TIMESTEPS, sigma_min * NUM_TRAIN_TIMESTEPS, num_steps
    )
    sigmas = shift_sigmas(spaced / NUM_TRAIN_TIMESTEPS, float(shift)).astype(np.float32)
    return FlowSchedule(
        timesteps=sigmas * np.float32(NUM_TRAIN_TIMESTEPS),
        sigmas=np.append(sigmas, np.float32(0.0)),
    )
