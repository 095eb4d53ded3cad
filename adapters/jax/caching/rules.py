"""The arithmetic of the cache policies on device (docs/caching.md, "Device semantics"):
TeaCache's and SenCache's decisions, the CFG cache's frequency-weighted estimate of the
unconditional prediction, and the calibration's residual norms. Statistics in float32.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from wanjax.adapters.jax.caching.state import SenCacheState, SenCacheValues, TeaCacheState, TeaCacheValues


def teacache_decision(
    tea: TeaCacheState, rule: TeaCacheValues, measured: jax.Array, may_reuse: jax.Array
) -> tuple[jax.Array, TeaCacheState]:
    """Whether this step reuses the cached residual, and the updated measure.

    measured: this step's e0 [copies * B, T, 6, D] or e [copies * B, T, D], float32, passes
    stacked (conditional rows first). Per pass p, acc_p += max(polyval(coefficients, rel_p), 0) with
    rel_p the relative L1 change of its rows; the batch reuses only when every pass would, and
    `may_reuse` is false on forced steps (then every accumulator restarts at 0).
    """
    copies = tea.accumulated.shape[0]
    current = measured.reshape(copies, -1)  # [P, rows of a pass * ...]
    previous = tea.previous.reshape(copies, -1)
    change = jnp.sum(jnp.abs(current - previous), axis=1) / jnp.sum(jnp.abs(previous), axis=1)  # [P]
    # the polynomial fits a distance; outside its fitted range it can dip below 0, which would let
    # an accumulator sink under any threshold (0 included): clamped, threshold 0 never reuses
    accumulated = tea.accumulated + jnp.maximum(jnp.polyval(rule.coefficients, change), 0.0)
    reuse = may_reuse & jnp.all(accumulated < rule.threshold)
    return reuse, TeaCacheState(measured, jnp.where(reuse, accumulated, 0.0))


def sencache_decision(
    sen: SenCacheState, rule: SenCacheValues, sample: jax.Array, timestep: jax.Array, may_reuse: jax.Array
) -> tuple[jax.Array, SenCacheState]:
    """Whether this step reuses the last guided prediction, and the state after a reuse.

    sample: the latents x_i [B, F, H, W, C] entering the step; timestep: t_i in 0..1000.
    The drift accumulates the RMS distance to x_ref and |t_i / 1000 - t_ref| every step since
    the last computed one; `may_reuse` is false on forced steps and after an expert switch.
    """
    distance = jnp.sqrt(jnp.mean(jnp.square((sample - sen.sample).astype(jnp.float32))))
    drift_x = sen.drift_x + distance
    drift_t = sen.drift_t + jnp.abs(timestep / 1000.0 - sen.timestep)
    score = rule.alpha_x * drift_x + rule.alpha_t * drift_t
    reuse = may_reuse & (score <= rule.threshold) & (sen.reused < rule.max_reuse)
    return reuse, sen._replace(drift_x=drift_x, drift_t=drift_t, reused=sen.reused + 1)


def low_frequency_mask(height: int, width: int) -> np.ndarray:
    """[H, W // 2 + 1] float32: 1 on the low frequencies of an rfft2 over (H, W) (the first and
    last quarter of the rows, the first quarter of the half-spectrum's columns), 0 elsewhere."""
    columns = width // 2 + 1
    rows_kept, columns_kept = max(1, height // 4), max(1, columns // 4)
    a = np.arange(height)[:, None]
    b = np.arange(columns)[None, :]
    low = ((a < rows_kept) | (a >= height - rows_kept + 1)) & (b < columns_kept)
    return low.astype(np.float32)


def estimate_unconditional(conditional: jax.Array, difference: jax.Array, weights: jax.Array) -> jax.Array:
    """FasterCache's CFG-cache estimate: conditional [B, F, H, W, C] plus the cached
    (unconditional - conditional) difference with its low- and high-frequency parts (over the
    spatial axes H, W) weighted by weights = (w_low, w_high). float32."""
    height, width = difference.shape[2:4]
    spectrum = jnp.fft.rfft2(difference.astype(jnp.float32), axes=(2, 3))  # [B, F, H, W//2 + 1, C]
    low = jnp.asarray(low_frequency_mask(height, width))[:, :, None]  # [H, W//2 + 1, 1]
    gain = weights[0] * low + weights[1] * (1.0 - low)
    return conditional + jnp.fft.irfft2(spectrum * gain, s=(height, width), axes=(2, 3))


def residual_norms(residual: jax.Array, copies: int) -> jax.Array:
    """residual [copies * B, S, D] -> per pass and token ||res||_2 [copies, S], float32, the
    batch rows of a pass averaged (the MagCache calibration measure)."""
    norms = jnp.linalg.norm(residual.astype(jnp.float32), axis=-1)  # [copies * B, S]
    return norms.reshape(copies, -1, norms.shape[-1]).mean(axis=1)
