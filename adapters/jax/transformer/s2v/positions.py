"""Where S2V's tokens sit for RoPE: integer (frame, row, column) positions, one row per token,
for `rope.position_tables`.

The official `rope_precompute` places a block of tokens by three triples: its start, its end
(exclusive) and the span of the full-resolution grid it covers. It has (end - start) positions
per axis, spread evenly over the span and truncated to integers (np.linspace(...).astype(int));
a block starting at a negative frame counts its frames from -start and turns the other way
(the table row's complex conjugate: a negative position here). The video tokens are their grid;
the reference image's tokens sit at frame 30; the frame packer's motion tokens at frames -1,
-3 and -19..-4 (see frame_pack.py).
"""

from __future__ import annotations

import numpy as np

REFERENCE_FRAME = 30
"""`WanModel_S2V.forward` places the reference image's tokens at RoPE frame 30."""

Triple = tuple[int, int, int]


def block_positions(start: Triple, end: Triple, span: Triple) -> np.ndarray:
    """[S, 3] int positions of a block of tokens in (frame, row, column) order, as `rope_precompute`
    lays out grid triple (start, end, span)."""
    axes = []
    for axis, (first, stop, size) in enumerate(zip(start, end, span, strict=True)):
        count = stop - first
        if axis == 0 and first < 0:  # counted from -first, then negated (the conjugate row)
            axes.append(-np.linspace(-first, -size - first + 1, count).astype(int))
        else:
            axes.append(np.linspace(first, size + first - 1, count).astype(int))
    f, h, w = np.meshgrid(*axes, indexing="ij")
    return np.stack([f, h, w], axis=-1).reshape(-1, 3)


def video_positions(grid: Triple) -> np.ndarray:
    """The video's tokens: its (F', H', W') grid, as every Wan model places them."""
    return block_positions((0, 0, 0), grid, grid)


def reference_positions(grid: Triple) -> np.ndarray:
    """The reference image's tokens: one latent frame's (1, H', W') grid at frame `REFERENCE_FRAME`."""
    _, h, w = grid
    return block_positions((REFERENCE_FRAME, 0, 0), (REFERENCE_FRAME + 1, h, w), (1, h, w))
