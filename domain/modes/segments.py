"""Videos made in segments, one module for every mode that makes them (Wan 2.2 Animate, Diffusion
Forcing's windows of latent frames; S2V continues a video the same way): the windows, their overlap, the previous frames
each window starts from, the padding of driving videos to whole windows, and the loop.

A video of N frames runs as windows of L frames; window k > 0 starts P frames (the overlap)
before window k-1 ended and is given those P generated frames, so each adds L - P new frames
and the last may run past N (its extra frames are dropped). The loop denoises each window in
the run's one denoising session (`ModeRun.denoise`: what does not change between windows is
kept, nothing of the same shape compiles again), decodes it, keeps its last P frames for the
next window and hands its new frames to `ModeRun.emit` at once, so the video is written as it is
made and no more than one window's frames are held.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import numpy as np

from wanjax.domain.conditioning import Conditioning
from wanjax.domain.errors import InvalidRequestError
from wanjax.domain.modes.base import Generated, ModeRun, array_namespace


@attrs.frozen
class Window:
    """One segment: pixel frames [start, start + length) of the (padded) video, the first `given`
    of them the previous window's last frames (0 for the first window)."""

    index: int
    start: int
    length: int
    given: int

    @property
    def frames(self) -> slice:
        return slice(self.start, self.start + self.length)


@attrs.frozen
class Segments:
    """The windows of a `frames`-frame video, `length` frames each, overlapping by `overlap`. A mode
    checks its own rules on the lengths first and names its settings; these are the layout's."""

    frames: int
    length: int
    overlap: int

    def __attrs_post_init__(self) -> None:
        if not 0 <= self.overlap < self.length or self.frames < 1:
            raise InvalidRequestError(
                f"segments of {self.length} frames overlapping by {self.overlap} over {self.frames} frame(s): "
                "the overlap must be shorter than a segment, and the video at least one frame"
            )

    @property
    def step(self) -> int:
        """New frames per window."""
        return self.length - self.overlap

    @property
    def count(self) -> int:
        return max(1, -(-(self.frames - self.overlap) // self.step))

    @property
    def padded_frames(self) -> int:
        """Frames the windows cover (driving videos are padded to this many)."""
        return self.count * self.step + self.overlap

    def starts(self) -> range:
        """Each window's first frame."""
        return range(0, self.count * self.step, self.step)

    def windows(self, *, clipped: bool = False) -> list[Window]:
        """Each window; `clipped`: the last ends where the video does, shorter than the others where
        the video ends sooner (Diffusion Forcing's windows: nothing past the end is made)."""
        length = lambda start: min(self.length, self.frames - start) if clipped else self.length  # noqa: E731
        return [Window(k, start, length(start), self.overlap if k else 0) for k, start in enumerate(self.starts())]


def window_of(frames: np.ndarray, window: Window) -> np.ndarray:
    """`window`'s frames of the video `frames` [N, ...] walked back and forth (1 2 3 2 1 2 ...) past
    its end, as diffusers' `pad_video_frames` pads driving videos (one frame repeats): only the
    window's own, so a driving video is held once, as given, however long."""
    return frames[_reflected(len(frames), np.arange(window.start, window.start + window.length))]


def _reflected(n: int, positions: np.ndarray) -> np.ndarray:
    if n == 1:
        return np.zeros_like(positions)
    period = 2 * (n - 1)
    index = positions % period
    return np.where(index < n, index, period - index)


WindowConditioning = Callable[[Window, Any], Conditioning]
"""(window, the previous window's last `given` frames [B, P, H, W, 3] in [-1, 1], unrounded, where
the decode left them; None for the first) -> the window's conditioning."""


def segment_noise(run: ModeRun, index: int) -> Any:
    """Segment `index`'s starting noise: the run's for the first, else the noise of seed + index
    (as Animate's and S2V's official loops draw it)."""
    if index == 0:
        return run.noise
    return run.parts.denoiser.noise(run.request.seed + index, tuple(run.noise.shape))


def generate_in_segments(
    run: ModeRun,
    segments: Segments,
    conditioning: WindowConditioning,
    *,
    video_latents: Callable[[Any], Any] = lambda latents: latents,
) -> Generated:
    """Each window of `segments` denoised from its own noise (window k: seed + k, window 0 the run's),
    given `conditioning(window, previous frames)`, decoded (`video_latents`: the part of its latents
    that is video) and its new frames emitted, cut to the video's frames. With latents asked for
    (no `run.decode`) each window but the last is still decoded, to condition the next, and the
    windows' latents come back joined."""
    latents: list[Any] = []
    previous, denoised, emitted = None, None, 0
    for window in segments.windows():
        noise = segment_noise(run, window.index)
        with run.span("conditioning"):
            given = conditioning(window, previous)
        denoised = run.denoise(noise, given, part=(window.index, segments.count))
        last = window.index == segments.count - 1
        if run.decode is None:
            latents.append(denoised.latents)
            if last:
                break  # latents only: the last window conditions nothing
        with run.span("vae_decode"):
            unit = run.parts.autoencoder.decode_to_unit(video_latents(denoised.latents))  # [B, L, H, W, 3] in [0, 1]
            previous = unit[:, unit.shape[1] - segments.overlap :] * 2.0 - 1.0 if segments.overlap else None
            if run.decode is not None:
                xp = array_namespace(unit)
                new = np.asarray(xp.round(unit[:, window.given :] * 255.0).astype(np.uint8))  # the output's bytes
                new = new[:, : segments.frames - emitted]  # cut on the host: every window computes alike
                run.emit(new)
                emitted += new.shape[1]
    assert denoised is not None
    joined = array_namespace(latents[0]).concat(latents, axis=1) if latents else denoised.latents
    return Generated(latents=joined, cache_report=denoised.cache_report)
