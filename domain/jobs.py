"""Generation jobs as a server keeps them: accepted, queued, run, finished (kept by `ports.JobStore`)."""

from __future__ import annotations

import enum
from typing import Any

import attrs


class JobStatus(str, enum.Enum):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def finished(self) -> bool:
        return self in (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED)


class JobCancelled(Exception):
    """Raised by a step callback to stop a run whose every job was cancelled."""


class RunInterrupted(Exception):
    """Raised by a step callback to stop a run because the server is shutting down: its jobs
    (those not cancelled) are queued again, for the next start to run."""


@attrs.frozen(kw_only=True)
class Job:
    """One accepted request. `request` is the validated request's fields (JSON values, every
    default resolved; its media files lie beside the job's video), enough to run it again after a
    restart; times are seconds since the epoch; `timings` the run's phases (s). The steps are
    those of the job's last state change: a running job's live progress is its runner's."""

    id: str
    request: dict[str, Any]
    status: JobStatus = JobStatus.QUEUED
    created_at: float
    started_at: float | None = None
    finished_at: float | None = None
    steps_done: int = 0
    steps_total: int = 0
    error: str | None = None
    timings: dict[str, float] = attrs.field(factory=dict)

    def queued_again(self) -> Job:
        """The job back in the queue, its interrupted run's start and progress forgotten (a run
        starts again from its first step)."""
        return attrs.evolve(self, status=JobStatus.QUEUED, started_at=None, steps_done=0)

    @property
    def all_timings(self) -> dict[str, float]:
        """The run's phases with the time it waited (`queued`) and its whole time (`total`)."""
        timings = dict(self.timings)
        if self.started_at is not None:
            timings["queued"] = self.started_at - self.created_at
        if self.finished_at is not None:
            timings["total"] = self.finished_at - self.created_at
        return timings
