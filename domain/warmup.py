"""The warm-up request: a run short enough to be cheap that still compiles everything.

A step's shapes do not depend on the step count (the plan's per-step values are
arguments), so two steps of the same request compile what fifty would; on Wan 2.2
A14B the two steps are split between the experts, so both experts' weights have run
through their executables too.
"""

from __future__ import annotations

import attrs

from wanjax.domain.modes.registry import requested_mode
from wanjax.domain.requests import GenerationRequest

WARMUP_STEPS = 2


def warmup_request(request: GenerationRequest, *, num_experts: int) -> GenerationRequest:
    """`request` cut to `WARMUP_STEPS` steps (its first timesteps, for a given timestep
    list), all of them run (the mode's `warmup_fields`: video-to-video at strength 1); with two experts, step 0 runs the
    high-noise one and step 1 the low-noise one."""
    fields = requested_mode(request).warmup_fields(request)
    if request.sample_timesteps is not None:
        short = attrs.evolve(request, sample_timesteps=request.sample_timesteps[:WARMUP_STEPS], **fields)
        steps = len(short.sample_timesteps)
    else:
        steps = min(WARMUP_STEPS, request.num_inference_steps)
        short = attrs.evolve(request, num_inference_steps=steps, **fields)
    if num_experts == 2 and steps == 2:
        short = attrs.evolve(short, boundary_ratio=None, expert_switch_step=1)
    return short
