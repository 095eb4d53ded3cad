"""Jobs in, videos out: the one worker thread that owns the model, and what the API asks of it."""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs

from wanjax.application.job_queue import JobQueue
from wanjax.application.job_requests import request_from_json
from wanjax.application.metrics import ServerMetrics
from wanjax.application.outputs import write_output
from wanjax.application.service import GenerationService
from wanjax.domain.config import GenerationConfig
from wanjax.domain.errors import WanjaxError
from wanjax.domain.jobs import Job, JobCancelled, JobStatus, RunInterrupted
from wanjax.domain.ports import JobStore
from wanjax.domain.requests import GenerationRequest

log = logging.getLogger(__name__)


class JobRunner:
    """Accepts jobs (validated, recorded, queued), runs them one batch at a time on one thread,
    writes each video atomically to `output_dir/ID.mp4`, and answers for any job ever accepted."""

    def __init__(
        self,
        service: GenerationService,
        config: GenerationConfig,
        store: JobStore,
        *,
        output_dir: Path,
        queue_capacity: int,
        max_batch: int,
        on_load_failure: Callable[[BaseException], None] = lambda error: None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """`on_load_failure(error)` is called on the worker thread when the model cannot load (the
        server should exit: no job can run); the jobs stay queued for the next start."""
        self._service = service
        self._config = config
        self._store = store
        self._output_dir = Path(output_dir)
        self._queue = JobQueue(queue_capacity)
        self._max_batch = max_batch
        self._on_load_failure = on_load_failure
        self._clock = clock
        self.load_error: BaseException | None = None
        self.metrics = ServerMetrics(lambda: len(self._queue))
        self._cancelled: set[str] = set()  # running jobs asked to stop
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._work, name="wanjax-worker", daemon=True)

    @property
    def ready(self) -> bool:
        """The model is loaded (the first job will not wait for it)."""
        return self._ready.is_set()

    def start(self) -> None:
        """Re-queues what an earlier process accepted and did not finish, then loads the model and
        runs jobs on the worker thread."""
        self._recover()
        self._thread.start()

    def stop(self, timeout: float | None = None) -> None:
        """Graceful shutdown: no job is taken any more, the running batch stops at its next step
        (the step on the device finishes) and its jobs are recorded as queued again, so that the
        next start on the same store runs them from the beginning; queued jobs stay queued.
        Returns once the worker has stopped (or `timeout` passed); at once while the model is
        still loading, since no job runs then."""
        self._stop.set()
        if self._ready.is_set():
            self._thread.join(timeout)

    def submit(self, body: Any) -> Job:
        """Validates (InvalidRequestError / ConfigError naming the field), records and queues `body`;
        QueueFull when the queue has no room (then nothing is recorded)."""
        request = request_from_json(body, self._config, self._service)
        job = Job(id=uuid.uuid4().hex, body=json.dumps(body), created_at=self._clock())
        self._queue.put(job.id, request, accept=lambda: self._store.add(job))
        return job

    def get(self, job_id: str) -> Job | None:
        return self._store.get(job_id)

    def cancel(self, job_id: str) -> Job | None:
        """A queued job is cancelled now; a running one stops at its next step (its batch runs on
        while it holds other jobs, its video is dropped). A finished job is returned unchanged."""
        job = self._store.get(job_id)
        if job is None or job.status.finished:
            return job
        if self._queue.remove(job_id):
            return self._finish(job, JobStatus.CANCELLED)
        with self._lock:
            self._cancelled.add(job_id)
        return job

    def output_path(self, job_id: str) -> Path:
        return self._output_dir / f"{job_id}.mp4"

    def _recover(self) -> None:
        for job in self._store.unfinished():
            try:
                request = request_from_json(json.loads(job.body), self._config, self._service)
            except WanjaxError as err:
                self._finish(job, JobStatus.FAILED, error=f"cannot be run by this server after its restart: {err}")
                continue
            self._store.update(job.queued_again())
            self._queue.restore(job.id, request)

    def _work(self) -> None:
        try:
            self._service.load()
        except Exception as err:
            log.error("wanjax serve: the model did not load, so no job can run: %s", err)
            self.load_error = err
            self._on_load_failure(err)
            return
        self._ready.set()
        while not self._stop.is_set():
            batch = self._queue.take(self._max_batch, timeout=0.2)
            if batch:
                self._run([job_id for job_id, _ in batch], [request for _, request in batch])

    def _run(self, job_ids: Sequence[str], requests: Sequence[GenerationRequest]) -> None:
        started = self._clock()
        jobs = {job_id: attrs.evolve(self._store.get(job_id), status=JobStatus.RUNNING, started_at=started)
                for job_id in job_ids}  # fmt: skip
        for job in jobs.values():
            self._store.update(job)
        self.metrics.batch(len(job_ids))
        last_step = [0.0]

        def on_step(done: int, total: int) -> None:
            now = time.perf_counter()
            if done > 1:  # the first step's interval would hold the conditioning and compile
                self.metrics.step(now - last_step[0])
            last_step[0] = now
            for job_id, job in jobs.items():
                jobs[job_id] = attrs.evolve(job, steps_done=done, steps_total=total)
                self._store.update(jobs[job_id])
            if self._stop.is_set():
                raise RunInterrupted
            with self._lock:
                if self._cancelled.issuperset(job_ids):
                    raise JobCancelled

        try:
            result = self._service.generate_batch(requests, on_step=on_step)
            for row, (job_id, job) in enumerate(jobs.items()):
                if self._take_cancelled(job_id):
                    self._finish(job, JobStatus.CANCELLED)
                    continue
                write_output(result.array[row : row + 1], self.output_path(job_id), self._config.sampling.fps)
                self._finish(job, JobStatus.SUCCEEDED, output=str(self.output_path(job_id)), timings=result.trace.seconds)
        except JobCancelled:
            for job_id in job_ids:
                self._take_cancelled(job_id)
                self._finish(self._store.get(job_id), JobStatus.CANCELLED)
        except RunInterrupted:
            for job_id in job_ids:
                job = self._store.get(job_id)
                if self._take_cancelled(job_id):
                    self._finish(job, JobStatus.CANCELLED)
                else:
                    self._store.update(job.queued_again())
        except Exception as err:  # a failed batch fails its jobs, never the server
            if not isinstance(err, WanjaxError):
                log.exception("jobs %s failed", ", ".join(job_ids))
            for job_id in job_ids:
                self._take_cancelled(job_id)
                job = self._store.get(job_id)
                if not job.status.finished:
                    self._finish(job, JobStatus.FAILED, error=f"{type(err).__name__}: {err}")

    def _take_cancelled(self, job_id: str) -> bool:
        with self._lock:
            if job_id in self._cancelled:
                self._cancelled.discard(job_id)
                return True
            return False

    def _finish(self, job: Job, status: JobStatus, **changes: Any) -> Job:
        finished = attrs.evolve(job, status=status, finished_at=self._clock(), **changes)
        self._store.update(finished)
        self.metrics.finished(status.value, finished.finished_at - job.created_at)
        return finished
