"""3D rotary position embedding of the Wan transformer (as diffusers' WanRotaryPosEmbed).

The head dimension H is split into a frame part and two equal height/width parts
(`h = w = 2 * (H // 6)`, `f = H - h - w`); each part rotates consecutive channel pairs
(2i, 2i+1) by the token's frame, row or column index times its own frequencies.
Tables depend only on the token grid (or the tokens' positions, `position_tables`), so they
are computed once per latent shape, on the host, in float64 (as diffusers does on CUDA/CPU) and stored as float32.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike


class RopeTables(NamedTuple):
    """cos and sin of the rotation angles, one row per token in (f, h, w) order: [S, H/2] each."""

    cos: ArrayLike
    sin: ArrayLike


def rope_axis_dims(head_dim: int) -> tuple[int, int, int]:
    """Channels of a head given to the frame, height and width axes."""
    hw = 2 * (head_dim // 6)
    return head_dim - 2 * hw, hw, hw


def rope_tables(
    head_dim: int, grid: tuple[int, int, int], max_seq_len: int, theta: float = 10000.0
) -> RopeTables:
    """Rotation tables for a (F', H', W') grid of patch tokens, as float32 numpy arrays."""
    if max(grid) > max_seq_len:
        raise ValueError(
            f"token grid {grid} exceeds rope_max_seq_len={max_seq_len} on some axis; "
            "use a smaller video or a checkpoint with a larger rope_max_seq_len"
        )
    f, h, w = np.meshgrid(*(np.arange(size) for size in grid), indexing="ij")
    return position_tables(head_dim, np.stack([f, h, w], axis=-1).reshape(-1, 3), theta)


def position_tables(head_dim: int, positions: np.ndarray, theta: float = 10000.0) -> RopeTables:
    """Rotation tables for tokens at integer (frame, row, column) `positions` [S, 3], as float32
    numpy arrays. A negative position turns the other way (S2V's motion tokens sit at negative
    frames: the official code takes the complex conjugate of the table's row)."""
    if head_dim % 2:
        raise ValueError(f"attention_head_dim must be even for RoPE, got {head_dim}")
    per_axis = []
    for axis, dim in enumerate(rope_axis_dims(head_dim)):
        inv_freq = 1.0 / theta ** (np.arange(0, dim, 2, dtype=np.float64) / dim)  # [dim/2]
        per_axis.append(np.outer(positions[:, axis].astype(np.float64), inv_freq))  # [S, dim/2]
    angles = np.concatenate(per_axis, axis=-1)  # [S, H/2]
    return RopeTables(np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32))


def apply_rope(x: jax.Array, tables: RopeTables) -> jax.Array:
    """Rotates channel pairs of x [B, S, N, H]; in fp32 like diffusers (the tables are fp32
    and torch promotes), cast back to x's dtype."""
    pairs = x.astype(jnp.float32).reshape(*x.shape[:-1], -1, 2)  # [B, S, N, H/2, 2]
    x1, x2 = pairs[..., 0], pairs[..., 1]
    cos = jnp.asarray(tables.cos)[None, :, None, :]  # [1, S, 1, H/2]
    sin = jnp.asarray(tables.sin)[None, :, None, :]
    rotated = jnp.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], axis=-1)
    return rotated.reshape(x.shape).astype(x.dtype)
