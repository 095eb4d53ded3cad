"""Shifted flow-matching schedules: the timesteps and sigmas of each Wan sampler.

A flow-matching model at noise level sigma sees x = (1 - sigma) * x0 + sigma * noise and
predicts the velocity noise - x0. Wan samples on a grid pushed towards sigma = 1 by
`shift_sigmas`. The two reference schedulers (diffusers' UniPC in flow mode and
FlowMatchEulerDiscrete) build that grid differently, and the transformer is conditioned
on their exact timestep values (UniPC truncates them to integers, Euler keeps floats), so
each builder here repeats its scheduler's arithmetic in the same dtype and order: a
reordered formula would move an integer timestep across a truncation boundary.
"""

from __future__ import annotations

import math

import attrs
import numpy as np

from wanjax.domain.errors import InvalidRequestError

NUM_TRAIN_TIMESTEPS = 1000
"""Length of the training noise grid; timestep = sigma * NUM_TRAIN_TIMESTEPS."""

_UNIPC_FIRST_SIGMA_NUDGE = 1e-6
"""UniPC lowers a first sigma of exactly 1 by this much, keeping its log-SNR finite."""


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


def unipc_flow_schedule(num_steps: int, shift: float) -> FlowSchedule:
    """The grid of diffusers' UniPCMultistepScheduler with use_flow_sigmas=True.

    num_steps sigmas evenly spaced on [1, 1/1000) in float64, shifted once; a first sigma
    of 1 is nudged down; timesteps are sigma * 1000 truncated to integers; sigmas are
    stored as float32 with a final 0.
    """
    _validate_steps_and_shift(num_steps, shift)
    base = np.linspace(1.0, 1.0 / NUM_TRAIN_TIMESTEPS, num_steps + 1)[:-1]
    sigmas = shift_sigmas(base, float(shift))
    if abs(sigmas[0] - 1.0) < _UNIPC_FIRST_SIGMA_NUDGE:
        sigmas[0] -= _UNIPC_FIRST_SIGMA_NUDGE
    timesteps = (sigmas * NUM_TRAIN_TIMESTEPS).astype(np.int64)
    return FlowSchedule(
        timesteps=timesteps.astype(np.float32),
        sigmas=np.append(sigmas, 0.0).astype(np.float32),
    )


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
