"""A model extension, the domain's half: what a Wan variant adds to the transformer (VACE's
hint blocks, Animate's pose and face branch, Wan 2.1 I2V's image embedder), as the request side
and the memory plan see it. Its JAX half (adapters/jax/transformer/extension.py) holds its
weights, hooks into the block loop, weight names and sharding rules under the same name.

The name is the key of its inputs in `Conditioning.extensions` and of its parameters in the
model (`model.<name>`); each input declares how it splits across the guidance rows.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs

from wanjax.domain.guidance import RowSplit
from wanjax.domain.specs import TransformerSpec


@attrs.frozen
class ExtensionCost:
    """What an extension adds to one expert, for the memory plan.

    parameters / kernels: its parameters, and of them the matmul kernels that fp8 storage stores
      (those of its layer stacks).
    extra_blocks: transformer blocks it runs beside the base ones, each with its own
      cross-attention K/V in the KV cache (VACE's hint blocks).
    held_token_arrays: [rows, tokens, D] arrays it holds while the base blocks run (VACE's hints).
    token_kernels: the matmul kernel entries every video token goes through once outside those
      blocks, for the FLOP count (domain/flops.py; VACE's control patch embedding, proj_in and
      hint projections; Animate's face adapters are not counted yet).
    """

    parameters: int
    kernels: int = 0
    extra_blocks: int = 0
    held_token_arrays: int = 0
    token_kernels: int = 0


@attrs.frozen
class ModelExtension:
    """One variant's additions to the transformer, as the domain sees them.

    name: the key of its inputs (`Conditioning.extensions[name]`) and of its parameters.
    inputs: its conditioning inputs by name, each with how it splits across the guidance rows
      (none: it reads only what every model reads, as I2V's image tokens).
    present: whether a model of this spec has it.
    cost: its parameter count and what it holds and runs, for the memory plan (domain/memory.py)
      and the FLOP count (domain/flops.py).
    whole_blocks_only: what it makes before the base blocks reads the tokens entering block 0 (VACE's
      hints), so the blocks run whole, never a range of them (DBCache's three ranges).
    cut: (spec, n) -> the spec fields of its own that change when the model keeps its first n base
      blocks (`wanjax bench --layers`; VACE keeps the hints of those blocks); none by default.
    appended_tokens: (spec, (H', W') latent rows and columns) -> the tokens it appends after each
      row's video tokens at most (S2V's reference and motion tokens), for the memory plan; none by default.
    """

    name: str
    inputs: Mapping[str, RowSplit]
    present: Callable[[TransformerSpec], bool]
    cost: Callable[[TransformerSpec], ExtensionCost]
    cut: Callable[[TransformerSpec, int], Mapping[str, Any]] = lambda spec, layers: {}
    whole_blocks_only: bool = False
    appended_tokens: Callable[[TransformerSpec, tuple[int, int]], int] = lambda spec, size: 0

    def given(self, **arrays: Any) -> dict[str, dict[str, Any]]:
        """`Conditioning.extensions` holding these inputs of this extension (None ones left out)."""
        unknown = sorted(set(arrays) - set(self.inputs))
        if unknown:
            raise TypeError(f"the {self.name} extension has no input(s) {unknown}; it reads {sorted(self.inputs)}")
        return {self.name: {name: value for name, value in arrays.items() if value is not None}}
