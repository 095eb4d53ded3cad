"""The queue of servers (replicas) that share one job store (`ports.SharedJobStore`): the jobs wait
in the store, and each replica's worker claims its batches there, so any replica takes any job."""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Sequence

from wanjax.application.job_queue import QueueFull, batch_of
from wanjax.application.job_requests import queued_request
from wanjax.domain.config import GenerationConfig
from wanjax.domain.errors import StoreError, WanjaxError
from wanjax.domain.jobs import Job
from wanjax.domain.ports import SharedJobStore
from wanjax.domain.requests import GenerationRequest

POLL_SECONDS = 0.25
"""How often an idle worker looks for claimable jobs in the store."""
CANDIDATES_PER_SLOT = 8
"""A claim looks this many jobs per batch slot down the queue for ones that share the oldest's batch
(without batching, at the oldest alone: the others stay claimable by other replicas meanwhile)."""


class StoreQueue:
    """JobQueue's part for a server whose store replicas share. `capacity` bounds the jobs waiting
    in the store, all replicas' together (checked before each is added: replicas accepting at the
    same moment may pass it by a few). `take` claims; a job this server cannot read back as a
    request (another model's) is claimed alone, for its run to fail it."""

    shared = True
    """Its jobs live in the store: none is restored at start (another replica may be running it)."""

    def __init__(self, store: SharedJobStore, config: GenerationConfig, *, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"queue capacity must be at least 1, got {capacity}")
        self._store, self._config, self.capacity = store, config, capacity

    @property
    def full(self) -> bool:
        return self._store.queued_count() >= self.capacity

    def __len__(self) -> int:
        return self._store.queued_count()

    def put(self, job_id: str, request: GenerationRequest, *, accept: Callable[[], None] = lambda: None) -> None:
        """Calls `accept()` (which records the job: that queues it) unless the queue is full (QueueFull)."""
        if self.full:
            raise QueueFull(f"the queue holds {self.capacity} jobs")
        accept()

    def requeue(self, batch: list[tuple[str, GenerationRequest | None]]) -> None:
        """Releases a batch that could not run; when the store cannot be written, their leases lapse instead."""
        try:
            self._store.release([job_id for job_id, _ in batch])
        except StoreError:
            pass

    def remove(self, job_id: str) -> bool:
        """Records a queued job cancelled (no replica claims it since); False when it is not queued."""
        return self._store.cancel_queued(job_id)

    def stepped(self, job_ids: Collection[str], done: int, total: int) -> set[str]:
        """Records the running jobs' progress in the store, for every replica to report, and returns
        those deleted through any replica (once per step); none while the store cannot be used (the
        run's end meets the store's error)."""
        try:
            return self._store.stepped(list(job_ids), done, total)
        except StoreError:
            return set()

    def take(
        self, max_batch: int, timeout: float | None = None, *,
        fits: Callable[[GenerationRequest, int], bool] = lambda request, batch: True,
    ) -> list[tuple[str, GenerationRequest | None]]:  # fmt: skip
        """Claims the oldest claimable job with the later ones that share its batch (`batch_of`),
        polling the store until `timeout` passes (then empty). StoreError when it cannot be read."""
        deadline = None if timeout is None else time.monotonic() + timeout
        requests: dict[str, GenerationRequest | None] = {}

        def choose(jobs: Sequence[Job]) -> list[Job]:
            if not jobs:
                return []
            requests.update((job.id, self._request(job)) for job in jobs)
            if requests[jobs[0].id] is None:
                return [jobs[0]]
            readable = [(job.id, requests[job.id]) for job in jobs if requests[job.id] is not None]
            chosen = {job_id for job_id, _ in batch_of(readable, max_batch, fits)}
            return [job for job in jobs if job.id in chosen]

        while True:
            claimed = self._store.claim(choose, candidates=1 if max_batch == 1 else max_batch * CANDIDATES_PER_SLOT)
            if claimed or (deadline is not None and time.monotonic() >= deadline):
                return [(job.id, requests[job.id]) for job in claimed]
            time.sleep(POLL_SECONDS)

    def _request(self, job: Job) -> GenerationRequest | None:
        try:
            return queued_request(job.request, self._config)
        except (WanjaxError, KeyError, TypeError, ValueError):
            return None
