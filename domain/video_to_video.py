"""Video-to-video: how much of the sampling schedule a source video skips, and the noisy start.

As diffusers' WanVideoToVideoPipeline: `strength` in (0, 1] keeps the last
int(num_steps * strength) steps of the full schedule (its `get_timesteps`), and the run
starts from the encoded video mixed with noise at the first kept step's sigma, the flow
interpolation (1 - sigma) * video + sigma * noise (UniPC's `add_noise`, flow-match Euler's
`scale_noise`). The official Wan code has no video-to-video (docs/sampling.md).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from wanjax.domain.errors import InvalidRequestError

DEFAULT_STRENGTH = 0.8
"""diffusers' WanVideoToVideoPipeline default."""


def first_denoising_step(num_steps: int, strength: float) -> int:
    """The index of the first step a video-to-video run takes of a `num_steps`-step schedule."""
    kept = min(int(num_steps * strength), num_steps)
    if kept < 1:
        raise InvalidRequestError(
            f"strength={strength!r} of {num_steps} steps keeps int({num_steps} * {strength!r}) = 0 steps; "
            f"raise strength to at least {1 / num_steps:.4g} or give more steps"
        )
    return num_steps - kept


def noised_latents(video_latents: Any, noise: Any, sigma: float) -> Any:
    """(1 - sigma) * video_latents + sigma * noise in float32, as diffusers mixes them; numpy or
    jax arrays (the video's latents [1, ...] broadcast over the noise's batch)."""
    sigma = np.float32(sigma)
    return (np.float32(1.0) - sigma) * video_latents + sigma * noise
