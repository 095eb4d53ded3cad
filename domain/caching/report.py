"""What a denoising run executed under its cache plan, per step (returned by `denoise` with its latents)."""

from __future__ import annotations

import attrs
import numpy as np


@attrs.frozen(kw_only=True, eq=False)
class CacheRunReport:
    """[S] bool arrays: which parts of each step ran (all True for a dense plan).

    transformer_ran: the transformer ran (False: SenCache reused the last guided prediction).
    blocks_ran: the transformer blocks ran (False: their cached residual stood in, or the
      transformer did not run at all).
    unconditional_ran: the unconditional rows ran (False: a CFG-cache conditional-only step,
      a skipped transformer, or a run without guidance).
    residual_norms: with calibration, [S, P, T] float32 per step, guidance pass (conditional
      first) and token, the L2 norm of the block residual; else None.
    pass_blocks_ran: where a feature decides per guidance pass (DBCache), [S, P] bool per step
      and pass (conditional first): its blocks ran (False: a cached residual stood in); else None.
    """

    transformer_ran: np.ndarray
    blocks_ran: np.ndarray
    unconditional_ran: np.ndarray
    residual_norms: np.ndarray | None = None
    pass_blocks_ran: np.ndarray | None = None

    @classmethod
    def of(
        cls,
        num_steps: int,
        uses_guidance: bool,
        *,
        transformer: np.ndarray | None = None,
        blocks: np.ndarray | None = None,
        unconditional: np.ndarray | None = None,
        residual_norms: np.ndarray | None = None,
        pass_blocks: np.ndarray | None = None,
    ) -> CacheRunReport:
        """From per-step flags [S] (None: that feature was off, so the part always ran)."""
        ran = np.ones(num_steps, dtype=bool)

        def flag(a: np.ndarray | None) -> np.ndarray:
            return ran if a is None else np.asarray(a, dtype=bool)

        transformer_ran = flag(transformer)
        norms = None if residual_norms is None else np.asarray(residual_norms, np.float32)
        return cls(
            transformer_ran=transformer_ran,
            blocks_ran=transformer_ran & flag(blocks),
            unconditional_ran=transformer_ran & flag(unconditional) & uses_guidance,
            residual_norms=norms,
            pass_blocks_ran=None if pass_blocks is None else np.asarray(pass_blocks, dtype=bool),
        )

    @property
    def num_steps(self) -> int:
        return len(self.blocks_ran)

    @property
    def steps_computed(self) -> int:
        """Steps whose transformer blocks ran."""
        return int(self.blocks_ran.sum())

    @property
    def steps_skipped(self) -> int:
        """Steps that skipped the blocks (a reused residual, or no transformer at all)."""
        return self.num_steps - self.steps_computed
