"""What a step-cache policy is to the device (docs/caching.md, "How to add a policy"): a
`DeviceFeature` that turns its feature plan into controls (per-step values and parameters),
makes its initial state, acts around the guided prediction, around the guidance rows' passes or
around the transformer blocks, and reports what ran. The step (adapters/jax/denoising/step.py)
calls the plan's feature at those three places; the defaults here pass through.

Its state lives in the loop's `CacheState` under its name; every pytree here is sized by which
feature is on, never by its values, so changing a schedule or a threshold never recompiles.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

import jax
from jax.typing import DTypeLike

from wanjax.adapters.jax.denoising.guider import Guider

if TYPE_CHECKING:
    from wanjax.adapters.jax.denoising.step import Step
    from wanjax.adapters.jax.transformer.model import TimeEmbedding

NO_EXPERT = -1
"""The `expert` of a cache that holds nothing yet: it matches no expert, so nothing is reused."""

CacheState = dict[str, Any]
"""What the loop carries: each feature's state under its name (empty for a dense plan)."""


class StepReport(NamedTuple):
    """What one step ran, for the host's `CacheRunReport` (None: no feature decides it, so it
    always ran). Scalars per step; stacked [S] by the scan."""

    transformer: jax.Array | None = None  # bool: False when the last prediction was reused
    blocks: jax.Array | None = None  # bool: False when the cached residual stood in for the blocks
    unconditional: jax.Array | None = None  # bool: False on a conditional-only step
    residual_norms: jax.Array | None = None  # [copies, S] float32: per pass and token, ||res||_2 (calibration)
    pass_blocks: jax.Array | None = None  # [copies] bool: per guidance pass, False when a cached residual stood in


class CacheShapes(NamedTuple):
    """The sizes the carried state is made of, fixed for a generation."""

    latents: tuple[int, ...]  # [B, F, H, W, C]: the solver's sample, and the velocity
    copies: int  # 2 with guidance (conditional, unconditional rows), else 1
    tokens: int  # S
    time_tokens: int  # T: 1, or S with one timestep per token (TI2V)
    width: int  # D
    activation_dtype: DTypeLike
    scheduler_dtype: DTypeLike


Result = tuple[jax.Array, CacheState, StepReport]
Predict = Callable[["Step", CacheState], Result]
"""The guided velocity [B, F', H', W', C] float32 of a step."""
Passes = Callable[["Step", Guider, CacheState], Result]
"""The transformer on a guider's rows -> their velocity [rows, F', H', W', C] float32."""
Blocks = Callable[..., jax.Array]
"""(step, tokens [rows, S, D], the blocks' modulation temb6[, layers]) -> the tokens leaving the
last block; `layers`, a slice of the blocks: only that contiguous range runs (DBCache)."""


class DeviceFeature:
    """A base class: every hook passes through. A feature sets `name` (its policy's) and
    overrides `controls`, `initial_state` and the hooks it needs."""

    name = "none"

    def controls(self, plan: Any) -> tuple[Any, Any]:
        """Its feature plan -> (per-step values, arrays [S, ...]; parameters), numpy; the default:
        nothing per step, no parameters."""
        return None, None

    def initial_state(self, params: Any, shapes: CacheShapes) -> Any:
        """Its state before the first step; nothing cached may be used before a step computed it."""
        return None

    def around_prediction(self, step: Step, x: jax.Array, cache: CacheState, predict: Predict) -> Result:
        """Around the guided prediction at latents x (SenCache reuses the last one)."""
        return predict(step, cache)

    def around_guidance(self, step: Step, x: jax.Array, guider: Guider, cache: CacheState, passes: Passes) -> Result:
        """Around the guidance rows' transformer passes at latents x [B, F', H', W', C] and their
        combination (the CFG cache runs the conditional rows only)."""
        velocity, cache, report = passes(step, guider, cache)
        return guider.combine(velocity, step.values.guidance_scale), cache, report

    def around_blocks(
        self, step: Step, tokens: jax.Array, time: TimeEmbedding, cache: CacheState, blocks: Blocks, copies: int
    ) -> tuple[jax.Array, CacheState, StepReport]:
        """Around the transformer blocks on tokens [copies * B, S, D] (MagCache and TeaCache add a
        cached residual instead)."""
        return blocks(step, tokens, time.temb6), cache, StepReport()
