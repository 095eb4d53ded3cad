"""Ports: what the application needs from the outside world, named without any backend.

Arrays crossing a port are numpy arrays or opaque backend arrays (`Any`); layouts are
stated in each contract. Adapters implement these; tests swap in fakes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

import attrs
import numpy as np

from wanjax.domain.caching.report import CacheRunReport
from wanjax.domain.conditioning import Conditioning
from wanjax.domain.frame_schedule import FrameSchedule
from wanjax.domain.jobs import Job
from wanjax.domain.lora import LoraSet
from wanjax.domain.plan import SamplingPlan

StepCallback = Callable[[int, int], None]
"""Called as (steps_done, steps_total) after each denoising step; an exception it raises
(e.g. a cancellation) stops the run there and propagates out of `denoise`."""

FramesCallback = Callable[[np.ndarray], None]
"""Called with a video's next uint8 frames [B, f, H, W, 3] as they are decoded (a segment's), in order."""


@attrs.frozen
class Denoised:
    """One `denoise` run's final latents [B, F', H', W', C] and what each of its steps ran under
    its cache plan: the run's own report, never another concurrent run's."""

    latents: Any
    cache_report: CacheRunReport


class TextEncoder(Protocol):
    """Prompts -> embeddings [B, L, D] float32, zero past each prompt's token count."""

    def encode(self, prompts: Sequence[str], max_sequence_length: int) -> np.ndarray: ...


class ImageEncoder(Protocol):
    """Images [H, W, 3] uint8 (RGB, any size) -> image embeddings [B, M, D] float32, one row per image
    (Wan 2.1 I2V: CLIP ViT-H/14's penultimate hidden state, [B, 257, 1280]). Each image is seen as
    diffusers' pipelines show it (the short side resized, the centre cropped) or, with `squash`, as
    the official Wan Animate shows its canvas (the whole image resized to the encoder's square)."""

    def encode(self, images: Sequence[np.ndarray], *, squash: bool = False) -> np.ndarray: ...


class SpeechEncoder(Protocol):
    """Speech for audio-driven modes (Wan 2.2 S2V): mono samples [N] float32 at 16 kHz -> per video
    frame of `fps`, every layer's hidden states [clips * infer_frames, L, C] float32, and how many
    clips of `infer_frames` frames the audio makes (the last runs past its end, its rows zero)."""

    def encode(self, waveform: np.ndarray, *, infer_frames: int, fps: int) -> tuple[np.ndarray, int]: ...


class DenoisingSession(Protocol):
    """One request's denoising: its plan over its prompts, run once or run after run (a mode's
    segments, each given the previous one's frames through its conditioning). What does not change
    between runs (the prompts' cross-attention K/V, the RoPE tables of a latent shape, the compiled
    executables) is made at the first run that needs it and kept for the next: runs of one shape
    compile nothing after the first."""

    def prepare(
        self, latents: Any, conditioning: Conditioning = Conditioning(), frames: FrameSchedule | None = None
    ) -> None:
        """Compiles whatever `denoise` with these shapes needs (for the plan it was opened to compile
        for); a no-op when already compiled."""
        ...

    def denoise(
        self,
        latents: Any,
        on_step: StepCallback | None = None,
        conditioning: Conditioning = Conditioning(),
        frames: FrameSchedule | None = None,
    ) -> Denoised:
        """The plan over `latents`; with `frames`, as Diffusion Forcing iterations, each latent frame
        at its own level of the plan's timesteps (domain/frame_schedule.py), the progress counting
        iterations."""
        ...


class Denoiser(Protocol):
    """Runs a sampling plan from initial noise to final latents.

    Latents are [B, F', H', W', C] (channels last); `context` and `negative_context`
    are text embeddings [B, L, D]; `negative_context` is None when guidance is off.
    Safe to call from several threads at once: a run keeps no state on the denoiser.
    """

    def noise(self, seed: int, shape: tuple[int, ...]) -> Any:
        """Standard normal initial latents, the same for the same seed on every run."""
        ...

    def session(
        self,
        plan: SamplingPlan,
        context: np.ndarray,
        negative_context: np.ndarray | None,
        *,
        compiled_for: SamplingPlan | None = None,
    ) -> DenoisingSession:
        """A session of `plan`'s runs over these prompts, compiled for `compiled_for` (a warm-up's
        full plan; `plan` by default)."""
        ...


class LoraSwitch(Protocol):
    """A request's LoRAs applied to the loaded denoiser for its run, without reloading or recompiling."""

    def applied(self, loras: LoraSet) -> AbstractContextManager[None]:
        """While the context lasts, the denoiser runs with `loras` (per expert, high noise first;
        none: the model as loaded); a run asking for other LoRAs waits for it to end."""
        ...


class VideoAutoencoder(Protocol):
    """Latents [B, F', H', W', C] (as the denoiser emits them) -> frames; input images or a video -> latents."""

    def encode_image(
        self, pixels: np.ndarray, height: int, width: int, num_frames: int, last_pixels: np.ndarray | None = None
    ) -> Any:
        """Normalized latents [1, F', H', W', C] of a video whose frame 0 is `pixels` (uint8 [H, W, 3],
        fitted to height x width) followed by num_frames - 1 frames of zeros (mid-grey), as diffusers builds it;
        with `last_pixels` (first-last-frame-to-video), the last of those frames is that image instead."""
        ...

    def encode_frames(self, frames: np.ndarray, height: int, width: int) -> Any:
        """Normalized latents [1, F', H', W', C] of `frames` (uint8 [F, H, W, 3], each fitted to height x width)."""
        ...

    def encode_video(self, video: np.ndarray) -> Any:
        """Normalized latents [1, F', H', W', C] of video [1, F, H, W, 3] in [-1, 1] (the encoder's
        mode, as diffusers' sample_mode="argmax")."""
        ...

    def prepare(self, latents: Any) -> None:
        """Compiles the decoder for latents of this shape; a no-op when already compiled."""
        ...

    def decode_to_uint8(self, latents: Any) -> np.ndarray:
        """Frames [B, F, H, W, 3] uint8."""
        ...

    def decode_to_unit(self, latents: Any) -> Any:
        """Frames [B, F, H, W, 3] float32 in [0, 1], left on the device (Wan Animate conditions each
        segment on the previous one's last frames before they are rounded)."""
        ...


class JobStore(Protocol):
    """Durable job records: a job `add`ed is on disk when `add` returns, and survives a kill. Each
    method raises StoreError (domain.errors) when the store cannot be read or written."""

    def probe(self) -> None:
        """Returns once a write can be committed (StoreError otherwise); changes no job."""
        ...

    def add(self, job: Job) -> None: ...

    def update(self, job: Job) -> bool:
        """Replaces the record of `job.id` with a state its run reached (running, ended, queued
        again), only while this server holds the run; whether it did. Held: the job is unfinished
        and not cancelled, and in a store shared by replicas this replica claimed it and no other
        did since; a cancelled job's end (`job` cancelled) is written once, by the replica that ran
        it (or any, if none did). A server that lost a job changes nothing."""
        ...

    def updating(self, job: Job) -> AbstractContextManager[None]:
        """`update` around a block that publishes the run's output (renames its files into place):
        the block runs only while this server holds the run (`jobs.JobLost` before it otherwise, and
        nothing is written), no other server can take the job or change its record meanwhile, and
        the record is written as the block ends (not when it raises)."""
        ...

    def cancel(self, job_id: str) -> bool:
        """Records an unfinished job cancelled (its run's holder, if any, still records its end);
        False when it has finished or is gone."""
        ...

    def remove(self, job_id: str) -> None:
        """Forgets the job (deleted by its client)."""
        ...

    def get(self, job_id: str) -> Job | None: ...

    def unfinished(self) -> Sequence[Job]:
        """Queued and running jobs, oldest first."""
        ...

    def page(self, *, after: str | None, limit: int, newest_first: bool) -> Sequence[Job] | None:
        """Up to `limit` jobs in the order accepted (`newest_first`: reversed), those after the
        job `after` when given; None when there is no job `after`."""
        ...


class SharedJobStore(JobStore, Protocol):
    """A JobStore that several servers (replicas) share, which is their queue too: each replica
    claims the jobs it runs and holds them under a lease that it renews while it lives. A job whose
    lease lapsed (its replica died) can be claimed again, and runs from its first step."""

    def claim(self, choose: Callable[[Sequence[Job]], Sequence[Job]], *, candidates: int) -> Sequence[Job]:
        """Hands `choose` up to `candidates` of the oldest claimable jobs (queued, or running under a
        lapsed lease), oldest first, while no other replica can claim them; the jobs it returns are
        this replica's from then on, recorded running (from their first step), and returned so."""
        ...

    def release(self, job_ids: Sequence[str]) -> None:
        """Queues this replica's running jobs among `job_ids` again, at once (not after their lease)."""
        ...

    def queued_count(self) -> int: ...

    def cancel_queued(self, job_id: str) -> bool:
        """Records the job cancelled if it is queued; whether it was (no replica can claim it since)."""
        ...

    def stepped(self, job_ids: Sequence[str], done: int, total: int) -> set[str]:
        """Records the steps done of the running `job_ids` this replica holds (the progress every
        replica reports) and returns those of `job_ids` whose record reads cancelled (deleted
        through any replica)."""
        ...
