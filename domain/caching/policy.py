"""What a step-cache policy is to the domain (docs/caching.md, "How to add a policy"): a name, a
settings section (an attrs class whose fields are its flat config keys), the checks that need
the published calibration, what its device state holds (the memory plan counts it), and a
planner that turns the section and the run's schedule into its own feature plan (the part of a
`CachePlan` keyed by its name)."""

from __future__ import annotations

from typing import Any, ClassVar, Protocol

import attrs
import numpy as np

from wanjax.domain.caching.published import PublishedCalibration
from wanjax.domain.specs import TransformerSpec


@attrs.frozen(kw_only=True, eq=False)
class RunSchedule:
    """What a planner knows of the run: step i uses expert `experts[i]` [S] and guidance
    `guidance_scales[i]` [S]; `uses_guidance`: the unconditional pass runs at all; `published`:
    the calibration `cache_model` names (None: none)."""

    experts: np.ndarray
    guidance_scales: np.ndarray
    uses_guidance: bool
    published: PublishedCalibration | None = None

    @property
    def num_steps(self) -> int:
        return len(self.experts)


@attrs.frozen
class HeldState:
    """What a policy's device state holds from step to step, in the run's units, for the memory
    plan: `token_arrays` arrays of the blocks' tokens [rows, tokens, width] in the activation dtype
    (a cached residual, a TaylorSeer difference); `time_token_widths` float32 values of `width`
    per row and timestep token (TeaCache's last modulation); `latent_arrays` float32 arrays of a
    video's latents per video (the CFG cache's difference, SenCache's references)."""

    token_arrays: int = 0
    time_token_widths: int = 0
    latent_arrays: int = 0

    def __add__(self, other: HeldState) -> HeldState:
        return HeldState(*(a + b for a, b in zip(attrs.astuple(self), attrs.astuple(other))))


class FeaturePlan(Protocol):
    """A policy's per-step decisions (numpy arrays and rule parameters), for its device feature;
    `acts` False: it would change nothing (then the denoiser runs its plain step)."""

    feature: ClassVar[str]

    @property
    def acts(self) -> bool: ...


class CachePolicy(Protocol):
    """One step cache. `name` is its `cache_policy` value and the key of its feature plan;
    `chosen_by_name` False: a switch of its own section turns it on (MagCache calibration)."""

    name: str
    settings: type
    chosen_by_name: bool

    def is_on(self, policy: str, section: Any) -> bool:
        """Whether the request asks for it (`policy`: the request's cache_policy)."""
        ...

    def check(self, section: Any, published: PublishedCalibration | None, *, on: bool) -> None:
        """Refuses what only the published calibration (or being on) reveals, before any model loads."""
        ...

    def check_model(self, section: Any, transformer: TransformerSpec) -> None:
        """Refuses, before the model loads, what this transformer cannot run (the request turns it on)."""
        ...

    def plan(self, section: Any, run: RunSchedule) -> FeaturePlan:
        """Its decisions for the run."""
        ...

    def held(self, section: Any) -> HeldState:
        """What its device state holds through the run (the memory plan counts it)."""
        ...


class ChosenByName:
    """The common case, a base class: on when cache_policy names it; no check beyond its section's own."""

    name: ClassVar[str]
    settings: ClassVar[type]
    chosen_by_name: ClassVar[bool] = True

    def is_on(self, policy: str, section: Any) -> bool:
        return policy == self.name

    def check(self, section: Any, published: PublishedCalibration | None, *, on: bool) -> None:
        return None

    def check_model(self, section: Any, transformer: TransformerSpec) -> None:
        return None

    def held(self, section: Any) -> HeldState:
        return HeldState()
