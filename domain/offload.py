"""Where the transformer's weights live (`offload`), and how the memory plan counts them.

- `none`: every expert's weights on the device for the whole run.
- `layers`: the blocks' weights (nearly all of a Wan transformer) in host memory; inside each
  denoising step the next block's weights are copied to the device while the current block runs,
  so the device holds the rest of the model and two blocks at a time.
- `auto`: the least offload the memory plan says fits (`none`, else `layers`).
"""

from __future__ import annotations

from collections.abc import Callable

from wanjax.domain.memory import MemoryPlan

AUTO = "auto"
OFFLOAD_SETTINGS = ("none", "layers", AUTO)  # least offload first


def least_offload(plan_for: Callable[[str], MemoryPlan]) -> tuple[str, MemoryPlan]:
    """The first setting, least offload first, whose plan fits (the last one's plan if none does)."""
    choices = [choice for choice in OFFLOAD_SETTINGS if choice != AUTO]
    for choice in choices:
        plan = plan_for(choice)
        if plan.fits:
            return choice, plan
    return choices[-1], plan
