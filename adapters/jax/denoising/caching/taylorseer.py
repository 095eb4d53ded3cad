"""TaylorSeer on device, as cache-dit 1.5.3's calibrator runs it for DBCache (docs/caching.md,
"TaylorSeer"): per guidance pass, the middle blocks' residual of the steps that computed it, kept
as a ladder of finite differences (the value, its first difference per step, the difference of
those ...), and on a reused step its Taylor polynomial at the steps elapsed since.

Order 0 is the plain reuse of the last computed residual (the ladder holds the value alone, and
the forecast is that value times 1), so DBCache without TaylorSeer runs the same code.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.typing import DTypeLike


class TaylorSeerState(NamedTuple):
    """The ladder of every guidance pass (its rows are the pass's rows of the batch).

    ladder: [order + 1, rows, S, D] activation dtype: entry i the i-th difference (entry 0 the
      residual itself) at the pass's last computed step; only the first `known` hold values.
    known: [copies] int32: how many ladder entries hold values (0: none yet in this context).
    computed_at: [copies] int32: the calibrator step of that last computed step.
    """

    ladder: jax.Array
    known: jax.Array
    computed_at: jax.Array

    @classmethod
    def empty(cls, order: int, copies: int, rows: int, tokens: int, width: int, dtype: DTypeLike) -> TaylorSeerState:
        ladder = jnp.zeros((order + 1, rows, tokens, width), dtype)
        return cls(ladder, jnp.zeros((copies,), jnp.int32), jnp.full((copies,), -1, jnp.int32))

    @property
    def order(self) -> int:
        return self.ladder.shape[0] - 1

    def restarted(self, fresh: jax.Array) -> TaylorSeerState:
        """Empty again where `fresh` (a new context: the other expert's steps begin)."""
        return self._replace(known=jnp.where(fresh, 0, self.known), computed_at=jnp.where(fresh, -1, self.computed_at))

    def forecast(self, step: jax.Array) -> jax.Array:
        """[rows, S, D]: per pass, sum over the known entries i of ladder[i] / i! * elapsed ** i,
        elapsed = step - computed_at (cache-dit's `TaylorSeerState.approximate`, its terms in
        that order)."""
        elapsed = _per_row(step - self.computed_at, self.ladder.shape[1])  # [rows]
        known = _per_row(self.known, self.ladder.shape[1])
        out = jnp.zeros(self.ladder.shape[1:], self.ladder.dtype)
        for i in range(self.order + 1):
            term = (1 / math.factorial(i)) * self.ladder[i] * _rows(elapsed**i).astype(self.ladder.dtype)
            out = jnp.where(_rows(i < known), out + term, out)
        return out

    def updated(self, residual: jax.Array, computed: jax.Array, step: jax.Array) -> TaylorSeerState:
        """After a step whose passes `computed` [copies] ran their middle blocks to `residual`
        [rows, S, D], at calibrator `step`: each such pass's ladder restarts from it, entry i + 1
        = (entry i - the old entry i) / the steps since, for as many entries as the old ladder
        held and only from calibrator step 2 on (cache-dit's `TaylorSeerState.derivative`)."""
        rows = self.ladder.shape[1]
        window = jnp.maximum(step - self.computed_at, 1)  # [copies]; 0 only where no old ladder is read
        differences = jnp.where(step > 1, jnp.minimum(self.known, self.order), 0)
        entries = [residual.astype(self.ladder.dtype)]
        for i in range(self.order):
            entries.append((entries[i] - self.ladder[i]) / _rows(_per_row(window, rows)).astype(self.ladder.dtype))
        ladder = jnp.where(_rows(_per_row(computed, rows))[None], jnp.stack(entries), self.ladder)
        return TaylorSeerState(
            ladder,
            jnp.where(computed, 1 + differences, self.known),
            jnp.where(computed, step, self.computed_at),
        )


def _per_row(per_pass: jax.Array, rows: int) -> jax.Array:
    """[copies] -> [rows]: each pass's value on each of its rows (the passes' rows are contiguous)."""
    return jnp.repeat(per_pass, rows // per_pass.shape[0], total_repeat_length=rows)


def _rows(per_row: jax.Array) -> jax.Array:
    """[rows] -> [rows, 1, 1], to broadcast over tokens and width."""
    return per_row[:, None, None]
