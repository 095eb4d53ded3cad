"""The device's per-step reports -> the host's `CacheRunReport`."""

from __future__ import annotations

import jax
import numpy as np

from wanjax.adapters.jax.denoising.caching.feature import StepReport
from wanjax.domain.caching.report import CacheRunReport


def run_report(report: StepReport, num_steps: int, uses_guidance: bool) -> CacheRunReport:
    """From the device's report with [S] fields (None where the feature was off)."""
    return CacheRunReport.of(
        num_steps,
        uses_guidance,
        transformer=report.transformer,
        blocks=report.blocks,
        unconditional=report.unconditional,
        residual_norms=report.residual_norms,
        pass_blocks=report.pass_blocks,
    )


def stacked(reports: list[StepReport]) -> StepReport:
    """The Python loop's per-step reports as one with [S] fields, like the scan's."""
    return jax.tree.map(lambda *steps: np.stack([np.asarray(s) for s in steps]), *reports)
