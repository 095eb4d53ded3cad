"""One generic, table-driven update for every flow-matching sampler wanjax runs.

UniPC (any order, with or without its corrector) and Euler are both linear in the
current sample, the previous corrected sample and the recent data predictions
d_j = x_j - sigma_j * v_j (v: the model's velocity output). Their weights depend only on
the sigma grid, so they are tabulated host-side (`SolverTable`) and the device loop only
gathers row i and applies `solver_step`, which uses nothing but `+`, `-`, `*` and
indexing: it runs unchanged on numpy arrays and on jax arrays under jit / lax.scan.

The step contract, with window_i = (d_i, d_{i-1}, ..., d_{i-K+1}) (K = table.width):

    d_i     = x_i - sigma_i * v_i
    xc_i    = sample_coef_i * x_i + last_coef_i * xc_{i-1}
              + sum_k corrector_coefs_i[k] * window_i[k]        (the corrected sample)
    x_{i+1} = corrected_coef_i * xc_i + sum_k predictor_coefs_i[k] * window_i[k]
    then xc_i becomes the last sample and d_i joins the history (the oldest drops out).

x_0 is the initial noise; x_S the result. Rows are built so that every weight on a
placeholder (xc_{-1}, d_j with j < 0) is exactly 0.
"""

from __future__ import annotations

from typing import Any, NamedTuple, TypeAlias

import attrs
import numpy as np

from wanjax.domain.scheduling.flow_sigmas import FlowSchedule, frozen_array

Array: TypeAlias = Any
"""A numpy or jax array; the step is pure arithmetic, so either works."""


class StepCoefficients(NamedTuple):
    """The weights of `solver_step`, for one step ([] / [K]) or stacked for all ([S] / [S, K]).

    A NamedTuple so that jax treats it as a pytree: stage the table's with
    `jax.tree.map(jnp.asarray, table.coefficients)`, then pass it as `xs` to lax.scan
    (or gather row i with `jax.tree.map(lambda a: a[i], ...)`).
    """

    sigma: Array  # noise level of the sample the model saw
    sample_coef: Array  # weight of x_i in the corrected sample
    last_coef: Array  # weight of the previous corrected sample
    corrector_coefs: Array  # [K] weights of window_i in the corrected sample
    corrected_coef: Array  # weight of the corrected sample in x_{i+1}
    predictor_coefs: Array  # [K] weights of window_i in x_{i+1}

    def astype(self, dtype: Any) -> StepCoefficients:
        """Every field cast to `dtype` (the dtype the loop computes in)."""
        return StepCoefficients(*(a.astype(dtype) for a in self))


class SolverState(NamedTuple):
    """What the loop carries between steps (a pytree, like StepCoefficients)."""

    sample: Array  # x_i: the latents the model sees next
    last_sample: Array  # xc_{i-1}: the previous corrected sample
    history: tuple[Array, ...]  # (d_{i-1}, ..., d_{i-K+1}): K - 1 data predictions, newest first


def _weighted_sum(weights: Array, terms: tuple[Array, ...]) -> Array:
    total = weights[0] * terms[0]
    for k in range(1, len(terms)):
        total = total + weights[k] * terms[k]
    return total


def solver_step(state: SolverState, model_output: Array, row: StepCoefficients) -> SolverState:
    """Advance one step given the model's velocity at state.sample (see the module contract).

    Computes in the promoted dtype of its inputs: give it float32 samples and rows.
    """
    data = state.sample - row.sigma * model_output
    window = (data, *state.history)
    corrected = (
        row.sample_coef * state.sample
        + row.last_coef * state.last_sample
        + _weighted_sum(row.corrector_coefs, window)
    )
    next_sample = row.corrected_coef * corrected + _weighted_sum(row.predictor_coefs, window)
    return SolverState(sample=next_sample, last_sample=corrected, history=window[:-1])


_WINDOW_FIELDS = ("corrector_coefs", "predictor_coefs")


def _frozen_coefficients(coefficients: StepCoefficients) -> StepCoefficients:
    return StepCoefficients(*(frozen_array(a) for a in coefficients))


@attrs.frozen(eq=False)
class SolverTable:
    """Everything a sampler needs for S steps, computed before any model runs."""

    schedule: FlowSchedule
    coefficients: StepCoefficients = attrs.field(converter=_frozen_coefficients)
    """Stacked rows: scalar fields [S], window fields [S, K]."""

    def __attrs_post_init__(self) -> None:
        steps = self.schedule.num_steps
        shapes = {name: a.shape for name, a in self.coefficients._asdict().items()}
        window = (steps, self.coefficients.corrector_coefs.shape[-1])
        expected = {name: window if name in _WINDOW_FIELDS else (steps,) for name in shapes}
        if shapes != expected or window[1] < 1:
            raise ValueError(f"solver table for {steps} steps has coefficient shapes {shapes}")
        if not all(np.issubdtype(a.dtype, np.floating) for a in self.coefficients):
            raise ValueError("solver table coefficients must be floating point")

    @property
    def timesteps(self) -> np.ndarray:
        """[S] float32: the exact timestep the transformer receives at step i."""
        return self.schedule.timesteps

    @property
    def sigmas(self) -> np.ndarray:
        """[S + 1] float32: noise level before step i; sigmas[S] == 0."""
        return self.schedule.sigmas

    @property
    def num_steps(self) -> int:
        return self.schedule.num_steps

    @property
    def width(self) -> int:
        """K: how many data predictions (the current one included) a step combines."""
        return int(self.coefficients.corrector_coefs.shape[1])

    def row(self, step: int) -> StepCoefficients:
        """The weights of step `step` (host-side loops and tests)."""
        return StepCoefficients(*(a[step] for a in self.coefficients))

    def initial_state(self, latents: Array) -> SolverState:
        """The state before step 0: placeholders reuse `latents` (their weights are 0)."""
        return SolverState(
            sample=latents, last_sample=latents, history=(latents,) * (self.width - 1)
        )
