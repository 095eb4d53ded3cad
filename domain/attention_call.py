"""What an attention kernel knows of one call before it runs: the `AttentionCall`.

It is static (plain Python, frozen, hashable): the same on every step of a run, so a kernel
reads it while its function is traced and picks its code, or refuses the call by name,
before anything compiles. What it holds:

- `kind`: `self` (the video tokens over themselves) or `cross` (over text, image or face tokens);
- `grid`: the (F', H', W') token grid the queries are laid out on, frame-major as the blocks
  hold them; None where the queries are not one video's grid (the face adapters, frame by frame);
- `layer`: the block's index where it is a Python constant (blocks as a list, `scan_layers`
  off); None under `nnx.scan`, whose one traced body serves every block: static data cannot
  differ between the layers of a scan, so a kernel that needed the layer would refuse None;
- `structure`: which keys each query sees (None: all of them): `FrameBlockCausal` today.

A kernel states which of the `FEATURES` (the kinds, the structures' names) it honours and, in
its `check(call)`, calls `refuse_unless_honoured`, which names the kernel, the feature and the fix.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Literal

from wanjax.domain.errors import ConfigError, InvalidRequestError

SELF = "self"
CROSS = "cross"
FRAME_BLOCK_CAUSAL = "frame-block-causal"
FEATURES = (SELF, CROSS, FRAME_BLOCK_CAUSAL)
"""What a call can ask of a kernel: its kind, and its structure by name."""
HONOURS_BLOCK_CAUSAL = "attention=xla or attention=blockwise"
"""The kernels that honour every structure, as a fix names them."""


@dataclasses.dataclass(frozen=True)
class FrameBlockCausal:
    """SkyReels-V2 Diffusion Forcing's self-attention: the latent frames (F', after patching)
    are cut into blocks of `frames_per_block`, and every token of block i attends to the tokens
    of blocks 0..i (diffusers' `causal_block_size`, its transformer's `num_frame_per_block`,
    whose mask it builds only when that is > 1). Tokens are frame-major, so the keys a query
    sees are a prefix: those up to the end of its own frame block."""

    frames_per_block: int
    name: ClassVar[str] = FRAME_BLOCK_CAUSAL

    def __post_init__(self) -> None:
        blocks = self.frames_per_block
        if isinstance(blocks, bool) or not isinstance(blocks, int) or blocks < 1:
            raise ConfigError(f"causal_block_size={blocks!r}: must be a whole number of latent frames >= 1")

    def tokens_per_block(self, grid: tuple[int, int, int]) -> int:
        """The tokens of one frame block of `grid` (F', H', W'); refuses F' that the blocks do not divide
        (diffusers' mask cannot be built there either)."""
        frames, height, width = grid
        if frames % self.frames_per_block:
            raise InvalidRequestError(
                f"frame-block-causal attention cuts the {frames} latent frames into blocks of "
                f"causal_block_size={self.frames_per_block}, which does not divide them: choose a frame "
                f"count whose latent frames are a multiple of {self.frames_per_block}, or a causal_block_size "
                f"that divides {frames}"
            )
        return self.frames_per_block * height * width

    def visible_keys(self, query_index: Any, grid: tuple[int, int, int]) -> Any:
        """How many keys (a prefix of the [S] keys, S = F' x H' x W') the queries at `query_index`
        see: to the end of their frame block. `query_index` is an int or an integer array of any
        array library (the arithmetic is `//`, `+`, `*`); the count never decreases with it."""
        block = self.tokens_per_block(grid)
        return (query_index // block + 1) * block


@dataclasses.dataclass(frozen=True, kw_only=True)
class AttentionCall:
    """The static description of one attention call (see the module docstring)."""

    kind: Literal["self", "cross"]
    grid: tuple[int, int, int] | None = None
    layer: int | None = None
    structure: FrameBlockCausal | None = None

    def __post_init__(self) -> None:
        if self.kind not in (SELF, CROSS):
            raise ValueError(f"an attention call is {SELF!r} or {CROSS!r}, got {self.kind!r}")
        if self.structure is None:
            return
        if self.kind != SELF or self.grid is None:
            raise ValueError(
                f"{self.structure.name} attention is a self-attention over a token grid, "
                f"not a {self.kind} call on grid {self.grid}"
            )
        self.structure.tokens_per_block(self.grid)

    @property
    def features(self) -> tuple[str, ...]:
        """What the call asks of a kernel: its kind, then its structure's name if it has one."""
        return (self.kind,) if self.structure is None else (self.kind, self.structure.name)

    def at_layer(self, layer: int) -> AttentionCall:
        """This call made by block `layer` (a Python int: blocks run as a list)."""
        return dataclasses.replace(self, layer=layer)

    def as_cross(self) -> AttentionCall:
        """The same block's cross-attention: the same queries, over tokens that are not the grid's."""
        return AttentionCall(kind=CROSS, grid=self.grid, layer=self.layer)

    def __str__(self) -> str:
        parts = [f"{self.kind}-attention"]
        if self.layer is not None:
            parts.append(f"of block {self.layer}")
        if self.grid is not None:
            parts.append(f"over the token grid {self.grid}")
        if self.structure is not None:
            parts.append(f"in blocks of {self.structure.frames_per_block} latent frames")
        return " ".join(parts)


def refuse_unless_honoured(kernel: str, honoured: frozenset[str], call: AttentionCall, fix: str) -> None:
    """A ConfigError naming `kernel` (its setting, e.g. "attention=cudnn"), the first feature of
    `call` it does not honour, and `fix`, where there is one; before the kernel traces anything."""
    missing = [feature for feature in call.features if feature not in honoured]
    if missing:
        raise ConfigError(f"{kernel} does not support {missing[0]} attention ({call}): {fix}")
