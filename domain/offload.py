"""Where the weights live (`offload`), and how the memory plan counts them.

- `none`: every component's weights on the device for the whole run.
- `components`: a component's weights are on the device only while it works: the JAX text
  encoder while it encodes the prompts, the VAE while it encodes (image or video conditioning)
  and while it decodes, each Wan 2.2 expert while its steps run. Between their uses they wait
  in host memory, so the device's peak is the largest phase's, not the sum of every component.
- `layers`: the transformer blocks' weights (nearly all of a Wan transformer) in host memory;
  inside each denoising step the next block's weights are copied to the device while the
  current block runs, so the device holds the rest of the model and two blocks at a time.
- `all`: both: the blocks stream as with `layers`, and the rest of each component (the experts'
  embeddings and head, the text encoder, the VAE) moves as with `components`.
- `auto`: the least offload the memory plan says fits, in the order of `OFFLOAD_ORDER`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from wanjax.domain.memory import MemoryPlan

AUTO = "auto"
OFFLOAD_ORDER = ("none", "components", "layers", "all")  # least offload first
OFFLOAD_SETTINGS = (*OFFLOAD_ORDER, AUTO)


def moves_components(offload: str) -> bool:
    """Whether each component's weights wait in host memory between its uses."""
    return offload in ("components", "all")


def streams_blocks(offload: str) -> bool:
    """Whether the transformer blocks' weights stay in host memory and stream in as the blocks run."""
    return offload in ("layers", "all")


def covering(first: str, second: str) -> str:
    """The least offload that does what both settings do (components and layers: all)."""
    moves = moves_components(first) or moves_components(second)
    streams = streams_blocks(first) or streams_blocks(second)
    return {(False, False): "none", (True, False): "components", (False, True): "layers", (True, True): "all"}[
        (moves, streams)
    ]


def least_offload(plan_for: Callable[[str], MemoryPlan]) -> tuple[str, MemoryPlan]:
    """The first setting, least offload first, whose plan fits (the last one's plan if none does)."""
    for choice in OFFLOAD_ORDER:
        plan = plan_for(choice)
        if plan.fits:
            return choice, plan
    return choice, plan
