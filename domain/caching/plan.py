"""The cache plan: what each denoising step may skip, keyed by the device feature that skips it.

Each policy (domain/caching/registry.py) turns the request into its own feature plan (decided
before the loop where the decision depends on the schedule only, a rule for the device where it
depends on the data); the `CachePlan` holds them by feature name. The denoiser's Python loop and
its scan loop execute any plan with the same step function; a dense plan (no feature) computes
everything.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import attrs
import numpy as np


@attrs.frozen(kw_only=True, eq=False)
class RulePlan:
    """A base for the plans decided on device: the policy's rule (its parameters) and
    force_compute [S] bool, the steps it must compute whatever it measures."""

    rule: Any
    force_compute: np.ndarray

    acts: ClassVar[bool] = True


@attrs.frozen(kw_only=True, eq=False)
class CachePlan:
    """num_steps: S. features: feature name -> that policy's plan (its arrays are [S]).
    policy: the cache_policy that made the plan (docs/caching.md), for traces and messages."""

    num_steps: int
    features: Mapping[str, Any] = attrs.field(factory=dict)
    policy: str = "none"

    @classmethod
    def dense(cls, num_steps: int) -> CachePlan:
        """Every step computes everything."""
        return cls(num_steps=num_steps)

    @classmethod
    def of(cls, num_steps: int, *plans: Any, policy: str = "none") -> CachePlan:
        """A plan of these feature plans (each keyed by its class's `feature`)."""
        return cls(num_steps=num_steps, features={plan.feature: plan for plan in plans}, policy=policy)

    @property
    def acting(self) -> dict[str, Any]:
        """The feature plans that change something (a MagCache plan that reuses no step does not)."""
        return {name: plan for name, plan in self.features.items() if plan.acts}

    @property
    def is_dense(self) -> bool:
        """Nothing can be skipped: the denoiser runs its plain step."""
        return not self.acting
