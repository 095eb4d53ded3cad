"""Generation jobs as a server keeps them: accepted, queued, run, finished (kept by `ports.JobStore`)."""

from __future__ import annotations

import enum
from pathlib import Path
from typing import Any

import attrs

from wanjax.domain.errors import ConfigError

POSTGRESQL_SCHEMES = ("postgresql://", "postgres://")
LEASE_SECONDS = 30.0
"""How long a replica's hold on a running job lasts unless renewed (--lease-seconds)."""
MAX_LEASE_SECONDS = 86400.0
"""--lease-seconds at most: a day (a replica that stopped holds its jobs that long)."""


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


class JobLost(Exception):
    """Raised when a server's run of a job no longer holds it: its lease lapsed and another replica
    took the job over, or the job was deleted or cancelled. The run writes nothing more of it."""


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


def _check_location(_: object, __: object, location: str | None) -> None:
    if location is not None and not location.startswith(POSTGRESQL_SCHEMES):
        raise ConfigError(f"--jobs {location!r}: give a PostgreSQL URL (postgresql://USER@HOST:PORT/DATABASE), "
                          "or leave it out for SQLite in the output folder")  # fmt: skip


def _check_lease(_: object, __: object, seconds: float) -> None:
    if not 1 <= seconds <= MAX_LEASE_SECONDS:
        raise ConfigError(f"--lease-seconds {seconds:g}: give 1 to {MAX_LEASE_SECONDS:g} (a replica renews its leases "
                          "every third of it; another takes its jobs that long after it stopped)")  # fmt: skip


@attrs.frozen(kw_only=True)
class JobStoreSettings:
    """Where a server keeps its jobs. `location` None: SQLite in `output_dir`, one server per
    folder; a PostgreSQL URL: a store that several replicas share (their `output_dir` one shared
    folder), each holding the jobs it runs under a lease of `lease_seconds`, renewed while they run."""

    output_dir: Path
    location: str | None = attrs.field(default=None, validator=_check_location)
    lease_seconds: float = attrs.field(default=LEASE_SECONDS, validator=_check_lease)

    @property
    def kind(self) -> str:
        """`sqlite` or `postgresql`: the store's adapter."""
        return "sqlite" if self.location is None else "postgresql"
