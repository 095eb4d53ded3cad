"""What a denoising loop hands its step to execute a `CachePlan`: per-step plan values, the
rule's parameters, and the state carried from step to step.

Every pytree here has None in place of a feature the plan does not use, so its structure
(and the compiled step) depends only on which features are on, never on their values: a
dense plan carries nothing and compiles the plain step; changing which steps reuse, the
CFG weights or a rule's threshold never recompiles.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import DTypeLike

from wanjax.domain.caching.plan import CachePlan, SenCacheRule, TeaCacheRule
from wanjax.domain.errors import ConfigError

NO_EXPERT = -1
"""The `expert` of a cache that holds nothing yet: it matches no expert, so nothing is reused."""


class CacheStepValues(NamedTuple):
    """One step's plan values ([] each, cfg_weights [2]), or all steps' stacked ([S], [S, 2])."""

    reuse_residual: jax.Array | None = None  # bool: skip the blocks, add the cached residual
    cond_only: jax.Array | None = None  # bool: run the conditional rows only
    cfg_weights: jax.Array | None = None  # float32 [2]: (low, high)-frequency weights of the estimate
    force_compute: jax.Array | None = None  # bool: the device rule must compute


@functools.partial(
    jax.tree_util.register_dataclass, data_fields=["threshold", "coefficients"], meta_fields=["input_is_modulation"]
)
@dataclasses.dataclass(frozen=True)
class TeaCacheValues:
    """TeaCacheRule as arrays; which embedding it measures is static (it sets the state's shape)."""

    threshold: jax.Array  # float32 []
    coefficients: jax.Array  # float32 [K], highest power first
    input_is_modulation: bool  # measure e0 (the blocks' modulation) rather than e (the time embedding)


class SenCacheValues(NamedTuple):
    """SenCacheRule as arrays."""

    threshold: jax.Array  # float32 []
    alpha_x: jax.Array  # float32 []
    alpha_t: jax.Array  # float32 []
    max_reuse: jax.Array  # int32 []


RuleValues = TeaCacheValues | SenCacheValues


@functools.partial(jax.tree_util.register_dataclass, data_fields=["steps", "rule"], meta_fields=["calibrate"])
@dataclasses.dataclass(frozen=True)
class CacheControls:
    """A CachePlan for the device loops: per-step values ([S], or one step's []), the rule's
    parameters (numpy until a jitted call takes them), and whether to report the residual
    norms (static: part of the structure). At most one feature is on."""

    steps: CacheStepValues
    rule: RuleValues | None
    calibrate: bool

    @classmethod
    def of(cls, plan: CachePlan) -> CacheControls:
        if plan.is_dense:
            return NO_CACHE
        reuses, cond_only = bool(plan.reuse_residual.any()), bool(plan.cond_only.any())
        features = [name for name, on in _features(plan, reuses, cond_only) if on]
        if len(features) > 1:
            raise ConfigError(
                f"this cache plan combines {' and '.join(features)}; the denoiser runs one cache policy "
                "at a time: choose one cache_policy (magcache_calibration runs with cache_policy=none)"
            )
        steps = CacheStepValues(
            reuse_residual=plan.reuse_residual.astype(bool) if reuses else None,
            cond_only=plan.cond_only.astype(bool) if cond_only else None,
            cfg_weights=plan.cfg_weights.astype(np.float32) if cond_only else None,
            force_compute=plan.force_compute.astype(bool) if plan.rule is not None else None,
        )
        return cls(steps, _rule_values(plan.rule), plan.calibrate)

    def at(self, i: int) -> CacheControls:
        """Step i's values (the Python loop); the rule as it is."""
        return dataclasses.replace(self, steps=jax.tree.map(lambda a: a[i], self.steps))

    @property
    def tracks_residual(self) -> bool:
        """The blocks may be skipped, so the loop carries their last residual."""
        return self.steps.reuse_residual is not None or isinstance(self.rule, TeaCacheValues)


NO_CACHE = CacheControls(CacheStepValues(), None, calibrate=False)
"""The dense plan's controls: nothing carried, nothing decided, the plain step."""


def _features(plan: CachePlan, reuses: bool, cond_only: bool) -> list[tuple[str, bool]]:
    return [
        ("residual reuse (MagCache)", reuses),
        ("conditional-only steps (CFG cache)", cond_only),
        (f"a device rule ({type(plan.rule).__name__})", plan.rule is not None),
        ("calibration", plan.calibrate),
    ]


def _rule_values(rule: TeaCacheRule | SenCacheRule | None) -> RuleValues | None:
    f32 = functools.partial(np.asarray, dtype=np.float32)
    if isinstance(rule, TeaCacheRule):
        return TeaCacheValues(f32(rule.threshold), f32(rule.coefficients), rule.input_is_modulation)
    if isinstance(rule, SenCacheRule):
        return SenCacheValues(f32(rule.threshold), f32(rule.alpha_x), f32(rule.alpha_t), np.int32(rule.max_reuse))
    return None


class ResidualCache(NamedTuple):
    """The blocks' output minus their input at the last step they ran, per batch row."""

    residual: jax.Array  # [copies * B, S, D] activation dtype
    expert: jax.Array  # int32 []: the expert that computed it (NO_EXPERT: none yet)


class TeaCacheState(NamedTuple):
    """TeaCache's running measure: the previous step's timestep embedding (all rows) and, per
    guidance pass (conditional first), the accumulated rescaled change since the blocks last ran."""

    previous: jax.Array  # [copies * B, T, 6, D] (e0) or [copies * B, T, D] (e) float32
    accumulated: jax.Array  # [copies] float32


class GuidanceCache(NamedTuple):
    """The unconditional minus the conditional prediction at the last step that ran both."""

    difference: jax.Array  # [B, F, H, W, C] float32
    expert: jax.Array  # int32 []


class SenCacheState(NamedTuple):
    """The guided prediction of the last computed step, where and when it was computed, the
    drift accumulated since, and how many steps in a row have reused it."""

    velocity: jax.Array  # [B, F, H, W, C] scheduler dtype: y_ref
    sample: jax.Array  # [B, F, H, W, C] scheduler dtype: x_ref
    timestep: jax.Array  # float32 []: t_ref, in units of 1000
    drift_x: jax.Array  # float32 []: acc_x
    drift_t: jax.Array  # float32 []: acc_t
    reused: jax.Array  # int32 []: n
    expert: jax.Array  # int32 []


class CacheState(NamedTuple):
    """What the loop carries for the plan's features (None: not used)."""

    residual: ResidualCache | None = None
    tea: TeaCacheState | None = None
    guidance: GuidanceCache | None = None
    sen: SenCacheState | None = None


class CacheShapes(NamedTuple):
    """The sizes the carried state is made of, fixed for a generation."""

    latents: tuple[int, ...]  # [B, F, H, W, C]: the solver's sample, and the velocity
    copies: int  # 2 with guidance (conditional, unconditional rows), else 1
    tokens: int  # S
    time_tokens: int  # T: 1, or S with one timestep per token (TI2V)
    width: int  # D
    activation_dtype: DTypeLike
    scheduler_dtype: DTypeLike


def initial_cache_state(controls: CacheControls, shapes: CacheShapes) -> CacheState:
    """Empty caches for the features `controls` uses; every `expert` is NO_EXPERT, so nothing
    cached is used before a step has computed it."""
    rule, rows = controls.rule, shapes.copies * shapes.latents[0]
    none, zero = jnp.int32(NO_EXPERT), jnp.float32(0.0)
    state = CacheState()
    if controls.tracks_residual:
        residual = jnp.zeros((rows, shapes.tokens, shapes.width), shapes.activation_dtype)
        state = state._replace(residual=ResidualCache(residual, none))
    if isinstance(rule, TeaCacheValues):
        per_row = (6, shapes.width) if rule.input_is_modulation else (shapes.width,)
        previous = jnp.zeros((rows, shapes.time_tokens, *per_row), jnp.float32)
        state = state._replace(tea=TeaCacheState(previous, jnp.zeros((shapes.copies,), jnp.float32)))
    if controls.steps.cond_only is not None:
        state = state._replace(guidance=GuidanceCache(jnp.zeros(shapes.latents, jnp.float32), none))
    if isinstance(rule, SenCacheValues):
        latents = jnp.zeros(shapes.latents, shapes.scheduler_dtype)
        state = state._replace(sen=SenCacheState(latents, latents, zero, zero, zero, jnp.int32(0), none))
    return state


class StepReport(NamedTuple):
    """What one step ran, for the host's `CacheRunReport` (None: that feature is off, so it
    always ran). Scalars per step; stacked [S] by the scan."""

    transformer: jax.Array | None = None  # bool: False when SenCache reused the last prediction
    blocks: jax.Array | None = None  # bool: False when the cached residual stood in for the blocks
    unconditional: jax.Array | None = None  # bool: False on a CFG-cache conditional-only step
    residual_norms: jax.Array | None = None  # [copies, S] float32: per pass and token, ||res||_2 (calibration)
