"""Parameter-free rearrangements between space/time and channels (Wan 2.2 VAE), channels last.

Each mirrors a diffusers reshape/permute on [B, C, T, H, W]; what matters for the
checkpoint is the order in which sub-pixel offsets are folded into channels, spelled
out at each function. Reshapes are exact in any dtype.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def patchify(x: jax.Array, patch: int) -> jax.Array:
    """[B, T, H, W, C] -> [B, T, H/p, W/p, C * p * p]; channel = c * p * p + dw * p + dh.

    diffusers' `patchify` puts the column offset dw before the row offset dh.
    """
    if patch == 1:
        return x
    b, t, h, w, c = x.shape
    x = x.reshape(b, t, h // patch, patch, w // patch, patch, c)  # [B, T, h, dh, w, dw, C]
    x = x.transpose(0, 1, 2, 4, 6, 5, 3)  # [B, T, h, w, C, dw, dh]
    return x.reshape(b, t, h // patch, w // patch, c * patch * patch)


def unpatchify(x: jax.Array, patch: int) -> jax.Array:
    """The inverse of `patchify`: [B, T, h, w, C * p * p] -> [B, T, h * p, w * p, C]."""
    if patch == 1:
        return x
    b, t, h, w, cpp = x.shape
    c = cpp // (patch * patch)
    x = x.reshape(b, t, h, w, c, patch, patch)  # [B, T, h, w, C, dw, dh]
    x = x.transpose(0, 1, 2, 6, 3, 5, 4)  # [B, T, h, dh, w, dw, C]
    return x.reshape(b, t, h * patch, w * patch, c)


def avg_down(x: jax.Array, out_dim: int, factor_t: int, factor_s: int) -> jax.Array:
    """diffusers' AvgDown3D: fold (factor_t, factor_s, factor_s) blocks into channels, average groups.

    [B, T, H, W, C] -> [B, ceil(T / ft), H / fs, W / fs, out_dim]. Time is first zero
    padded on the left to a multiple of factor_t (so a lone first frame is averaged
    with zeros, as diffusers does). Folded channel = c * f + (dt * fs + dh) * fs + dw
    with f = ft * fs * fs; output channel o averages folded channels [o * g, (o + 1) * g).
    """
    pad_t = -x.shape[1] % factor_t
    x = jnp.pad(x, ((0, 0), (pad_t, 0), (0, 0), (0, 0), (0, 0)))
    b, t, h, w, c = x.shape
    t, h, w = t // factor_t, h // factor_s, w // factor_s
    x = x.reshape(b, t, factor_t, h, factor_s, w, factor_s, c)  # [B, t, dt, h, dh, w, dw, C]
    x = x.transpose(0, 1, 3, 5, 7, 2, 4, 6)  # [B, t, h, w, C, dt, dh, dw]
    group = c * factor_t * factor_s * factor_s // out_dim
    # torch sums the group in its own order; the mean can differ from ours in the last bit.
    return x.reshape(b, t, h, w, out_dim, group).mean(axis=-1)


def dup_up(x: jax.Array, out_dim: int, factor_t: int, factor_s: int, *, first_chunk: bool) -> jax.Array:
    """diffusers' DupUp3D: repeat channels, unfold them into (factor_t, factor_s, factor_s) blocks.

    [B, T, H, W, C] -> [B, T * ft, H * fs, W * fs, out_dim]; on the first chunk the
    first ft - 1 frames are dropped, as the temporal upsample of the main path there
    yields one frame per input frame. Repeated channel k = c * r + i holds channel c;
    it lands at (o, dt, dh, dw) with k = ((o * ft + dt) * fs + dh) * fs + dw.
    """
    b, t, h, w, c = x.shape
    repeats = out_dim * factor_t * factor_s * factor_s // c
    x = jnp.repeat(x, repeats, axis=-1)  # torch's repeat_interleave
    x = x.reshape(b, t, h, w, out_dim, factor_t, factor_s, factor_s)  # [B, T, H, W, O, dt, dh, dw]
    x = x.transpose(0, 1, 5, 2, 6, 3, 7, 4)  # [B, T, dt, H, dh, W, dw, O]
    x = x.reshape(b, t * factor_t, h * factor_s, w * factor_s, out_dim)
    return x[:, factor_t - 1 :] if first_chunk else x
