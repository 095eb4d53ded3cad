"""The bounded queue in front of the one worker: first in, first out, with compatible requests
taken together so that one `generate_batch` (one compiled step) serves them."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Collection, Sequence

from wanjax.domain.batch import shared_request
from wanjax.domain.errors import InvalidRequestError
from wanjax.domain.modes.registry import requested_mode
from wanjax.domain.requests import GenerationRequest


class QueueFull(Exception):
    """The queue holds `capacity` jobs; try again later."""


class JobQueue:
    """Job ids with their requests, oldest first. `put` refuses past `capacity`; `restore` (jobs
    accepted before a restart) never does, so nothing accepted is dropped."""

    shared = False
    """One server's queue: its jobs are those its store holds unfinished when it starts."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"queue capacity must be at least 1, got {capacity}")
        self.capacity = capacity
        self._jobs: OrderedDict[str, GenerationRequest] = OrderedDict()
        self._changed = threading.Condition()

    @property
    def full(self) -> bool:
        with self._changed:
            return len(self._jobs) >= self.capacity

    def __len__(self) -> int:
        with self._changed:
            return len(self._jobs)

    def put(self, job_id: str, request: GenerationRequest, *, accept: Callable[[], None] = lambda: None) -> None:
        """Queues the job, calling `accept()` (e.g. record it) first while the queue is held, so no
        other `put` takes its place meanwhile; raises QueueFull when there is no room."""
        with self._changed:
            if len(self._jobs) >= self.capacity:
                raise QueueFull(f"the queue holds {self.capacity} jobs")
            accept()
            self._jobs[job_id] = request
            self._changed.notify_all()

    def restore(self, job_id: str, request: GenerationRequest) -> None:
        with self._changed:
            self._jobs[job_id] = request
            self._changed.notify_all()

    def requeue(self, batch: list[tuple[str, GenerationRequest]]) -> None:
        """Puts jobs taken (a batch that could not run) back at the head of the queue, in order."""
        with self._changed:
            for job_id, request in reversed(batch):
                self._jobs[job_id] = request
                self._jobs.move_to_end(job_id, last=False)
            self._changed.notify_all()

    def remove(self, job_id: str) -> bool:
        """Takes a queued job out (cancelled); False when it is not queued (running or finished)."""
        with self._changed:
            return self._jobs.pop(job_id, None) is not None

    def take(
        self, max_batch: int, timeout: float | None = None, *,
        fits: Callable[[GenerationRequest, int], bool] = lambda request, batch: True,
    ) -> list[tuple[str, GenerationRequest]]:  # fmt: skip
        """Waits for a job; returns its batch (`batch_of` the queued jobs). Empty when `timeout`
        passes first."""
        with self._changed:
            if not self._changed.wait_for(lambda: self._jobs, timeout):
                return []
            batch = batch_of(list(self._jobs.items()), max_batch, fits)
            for job_id, _ in batch:
                del self._jobs[job_id]
            return batch

    def stepped(self, job_ids: Collection[str], done: int, total: int) -> set[str]:
        """Those of the running `job_ids` cancelled by another server: none, since this queue is one
        server's (whose runner keeps their progress in memory)."""
        return set()


def batch_of(
    waiting: Sequence[tuple[str, GenerationRequest]], max_batch: int,
    fits: Callable[[GenerationRequest, int], bool] = lambda request, batch: True,
) -> list[tuple[str, GenerationRequest]]:  # fmt: skip
    """The first of `waiting` (oldest first) with up to `max_batch - 1` later ones that can share its
    batch (`shared_request`: they differ only in prompt, negative prompt and seed), as many as
    `fits(request, batch size)` allows."""
    head_id, head = waiting[0]
    batch = [(head_id, head)]
    for job_id, request in waiting[1:]:
        if len(batch) == max_batch or not fits(head, len(batch) + 1):
            break
        if _compatible(head, request):
            batch.append((job_id, request))
    return batch


def _compatible(first: GenerationRequest, other: GenerationRequest) -> bool:
    """Whether the two can share a batch; never with media, which a queue holds as stand-ins."""
    if any(requested_mode(request).inputs for request in (first, other)):
        return False
    try:
        shared_request([first, other])
    except InvalidRequestError:
        return False
    return True
