"""The JAX denoiser: executes a SamplingPlan with the Wan transformer(s).

A request's runs share one `JaxDenoisingSession` (session.py), the one way to denoise. It runs a
`DenoisingProgram` either as a Python loop over its one compiled step (per-step progress; any step
count, shift, guidance scale or expert switch runs without recompiling) or, with
`scan_diffusion_loop`, as its one compiled `lax.scan` over all steps. Both execute the
plan's `CachePlan` with the same step; each run returns its own report of what ran.
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from wanjax.adapters.jax.denoising.program import DenoiserOptions, DenoisingProgram
from wanjax.adapters.jax.denoising.session import JaxDenoisingSession
from wanjax.adapters.jax.transformer.model import WanTransformer
from wanjax.domain.plan import SamplingPlan


class JaxDenoiser:
    """Implements the Denoiser port on Wan transformers: one, or Wan 2.2's two experts (high noise first)."""

    def __init__(self, experts: Sequence[WanTransformer], options: DenoiserOptions = DenoiserOptions()) -> None:
        self.program = DenoisingProgram(experts, options)

    @property
    def num_compiled(self) -> int:
        """Denoising executables compiled so far: one per latent/context shape whatever the expert
        (and, with scan_diffusion_loop, per step count); the KV-cache builder is not counted."""
        return self.program.num_compiled

    def noise(self, seed: int, shape: tuple[int, ...]) -> jax.Array:
        return jax.random.normal(jax.random.key(seed), shape, dtype=jnp.float32)

    def session(
        self,
        plan: SamplingPlan,
        context: np.ndarray,
        negative_context: np.ndarray | None,
        *,
        compiled_for: SamplingPlan | None = None,
    ) -> JaxDenoisingSession:
        return JaxDenoisingSession(self.program, plan, context, negative_context, compiled_for)
