"""A denoiser whose segments start from the noise the reference pipelines draw.

diffusers' WanAnimatePipeline and the official `WanAnimate.generate` draw each segment's
noise from one torch generator, in turn; wanjax draws segment k's from seed + k. Tests wrap
the real denoiser in `NoiseInTurn` so that seed + k gives the generator's k-th draw. The official
`WanS2V.generate` draws clip k's from a generator seeded with seed + k: `NoiseOfSeed`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch


class NoiseInTurn:
    """The real denoiser, but its noise for seeds seed, seed + 1, ... is the successive draws of
    `torch.randn(latent_shape)` ([C, F, H, W]) from one generator seeded with `seed`; the latents
    each `denoise` returns are kept in `denoised` ([B, F, H, W, C])."""

    def __init__(self, denoiser: Any, seed: int, latent_shape: tuple[int, ...], segments: int) -> None:
        self._denoiser = denoiser
        generator = torch.Generator().manual_seed(seed)
        draws = [torch.randn(latent_shape, generator=generator).numpy() for _ in range(segments)]
        self._noise = {seed + k: draw.transpose(1, 2, 3, 0)[None] for k, draw in enumerate(draws)}  # ours: [B, F, H, W, C]
        self.denoised: list[np.ndarray] = []

    def noise(self, seed: int, shape: tuple[int, ...]) -> np.ndarray:
        assert tuple(shape) == self._noise[seed].shape
        return self._noise[seed]

    def session(self, *args: Any, **kwargs: Any) -> Any:
        return _Recorded(self._denoiser.session(*args, **kwargs), self.denoised)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._denoiser, name)


class NoiseOfSeed(NoiseInTurn):
    """The real denoiser, but its noise for a seed is `torch.randn(latent_shape)` ([C, F, H, W])
    from a generator seeded with it (for seeds seed .. seed + segments - 1)."""

    def __init__(self, denoiser: Any, seed: int, latent_shape: tuple[int, ...], segments: int) -> None:
        super().__init__(denoiser, seed, latent_shape, 0)
        for k in range(segments):
            draw = torch.randn(latent_shape, generator=torch.Generator().manual_seed(seed + k)).numpy()
            self._noise[seed + k] = draw.transpose(1, 2, 3, 0)[None]


class _Recorded:
    """A session whose runs' latents are appended to `denoised`."""

    def __init__(self, session: Any, denoised: list[np.ndarray]) -> None:
        self._session, self._denoised = session, denoised

    def denoise(self, *args: Any, **kwargs: Any) -> Any:
        result = self._session.denoise(*args, **kwargs)
        self._denoised.append(np.asarray(result.latents))
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)
