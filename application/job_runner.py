"""Jobs in, videos out: the one worker thread that owns the model, and what the API asks of it."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from wanjax.application.job_files import JobFiles, JobVideo
from wanjax.application.job_queue import JobQueue, QueueFull
from wanjax.application.job_requests import (
    MEDIA_FIELDS,
    queued_request,
    request_from_record,
    request_record,
    validated_request,
)
from wanjax.application.lora_folder import LoraFolder
from wanjax.application.metrics import ServerMetrics
from wanjax.application.store_queue import StoreQueue
from wanjax.application.service import GenerationService
from wanjax.domain.caching.settings import POLICIES, policy_keys
from wanjax.domain.config import GenerationConfig
from wanjax.domain.errors import InvalidRequestError, StoreError, WanjaxError
from wanjax.domain.inputs.fields import Entrypoint, named_for
from wanjax.domain.jobs import Job, JobCancelled, JobLost, JobStatus, RunInterrupted
from wanjax.domain.ports import JobStore
from wanjax.domain.requests import GenerationRequest

log = logging.getLogger(__name__)
STORE_RETRY_SECONDS = 2.0
"""How often the worker tries the store again while it cannot be written."""


class JobRunner:
    """Accepts jobs (validated, recorded, queued), runs them one batch at a time on one thread,
    writes each video atomically to its folder (`JobFiles`), and answers for any job ever
    accepted and not deleted. The store hears of a job's state changes only; its progress while
    it runs lives here (and in a store replicas share, for the others to report)."""

    def __init__(
        self,
        service: GenerationService,
        config: GenerationConfig,
        store: JobStore,
        *,
        output_dir: Path,
        queue_capacity: int,
        max_batch: int,
        model: str = "demo",
        loras: LoraFolder | None = None,
        on_load_failure: Callable[[BaseException], None] = lambda error: None,
        check_memory: Callable[[GenerationRequest, int], object] = lambda request, batch: None,
        clock: Callable[[], float] = time.time,
        queue: JobQueue | StoreQueue | None = None,
    ) -> None:
        """`model` is the served model's name, which a request may give; `on_load_failure(error)`
        is called on the worker thread when the model cannot load (the server should exit: no job
        can run); the jobs stay queued for the next start. `check_memory(request, batch)` refuses a
        request whose memory plan for a batch of that size does not fit (InvalidRequestError): a
        request alone before it is queued, and no batch grows past what fits. Requests name their
        LoRAs by their files in `loras` (None: requests carry none). `queue`: where jobs wait, a
        StoreQueue when replicas share `store`; by default this server's own JobQueue of
        `queue_capacity` jobs."""
        self._service = service
        self._config = config
        self._store = store
        self.files = JobFiles(output_dir)
        self.model = model
        self.loras = loras
        self._queue = JobQueue(queue_capacity) if queue is None else queue
        self._max_batch = max_batch
        self._on_load_failure = on_load_failure
        self._check_memory = check_memory
        self._clock = clock
        self.store_error: str | None = None
        """Why the store cannot be written, while it cannot (None when it can)."""
        self.load_error: BaseException | None = None
        self.metrics = ServerMetrics(lambda: len(self._queue))
        self._cancelled: set[str] = set()  # running jobs asked to stop
        self._progress: dict[str, tuple[int, int]] = {}  # running jobs' (steps done, steps in all)
        self._step_seconds: float | None = None  # the last step's time
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._work, name="wanjax-worker", daemon=True)

    @property
    def ready(self) -> bool:
        """The model is loaded (the first job will not wait for it)."""
        return self._ready.is_set()

    @property
    def working(self) -> bool:
        """The worker thread is still running (loading the model, or running a batch)."""
        return self._thread.is_alive()

    @property
    def fps(self) -> int:
        """The frame rate of every video."""
        return self._config.sampling.fps

    @property
    def defaults(self) -> dict[str, Any]:
        """What a request gets for the fields it leaves out."""
        sampling = self._config.sampling
        names = ("width", "height", "num_frames", "fps", "num_inference_steps", "guidance_scale", "negative_prompt")
        return {**{name: getattr(sampling, name) for name in names}, "cache_policy": self._config.cache.policy}

    @property
    def cache_policies(self) -> dict[str, dict[str, Any]]:
        """Every step cache a request may choose (`cache_policy`), each with its own keys at this
        server's values (docs/caching.md)."""
        config = self._config
        return {policy: {key: config.value(key) for key in policy_keys(policy)} for policy in POLICIES}

    @property
    def step_seconds(self) -> float | None:
        """How long the last denoising step took (None before a second step ever ran)."""
        return self._step_seconds

    def start(self) -> None:
        """Re-queues what an earlier process accepted and did not finish (a shared store's jobs wait
        there already), then loads the model and runs jobs on the worker thread."""
        if not self._queue.shared:
            self._recover()
        self._thread.start()

    def stop(self, timeout: float | None = None) -> None:
        """Graceful shutdown: no job is taken any more, the running batch stops at its next step
        (the step on the device finishes) and its jobs are recorded as queued again, so that the
        next start on the same store runs them from the beginning; queued jobs stay queued.
        Returns once the worker has stopped (or `timeout` passed); at once while the model is
        still loading, since no job runs then."""
        self._stop.set()
        if self._ready.is_set() and self._thread.is_alive():
            self._thread.join(timeout)

    def check_accepting(self) -> None:
        """Raises what a submission would meet before it is read: StoreError while the store cannot
        be written, QueueFull while the queue has no room."""
        if self.store_error is not None:
            raise StoreError(self.store_error)
        if self._queue.full:
            raise QueueFull(f"the queue holds {self._queue.capacity} jobs")

    def submit(self, fields: Mapping[str, Any], media: Mapping[str, bytes] = {}) -> Job:
        """Validates the client's `fields` and `media` (`job_requests.validated_request`: an
        InvalidRequestError / ConfigError naming the field), keeps the media beside the job, records
        and queues it; QueueFull when the queue has no room, StoreError when the store cannot be
        written (then nothing is kept)."""
        self.check_accepting()
        request = validated_request(fields, media, self._config, self._service, model=self.model,
                                    check_memory=lambda request: self._check_memory(request, 1), loras=self.loras)  # fmt: skip
        job = Job(id=uuid.uuid4().hex, request=request_record(request), created_at=self._clock())
        try:
            self.files.write_media(job.id, {MEDIA_FIELDS[name]: data for name, data in media.items()})
            self._queue.put(job.id, request, accept=lambda: self._store.add(job))
        except StoreError as err:
            self.store_error = str(err)
            self.files.remove(job.id)
            raise
        except BaseException:
            self.files.remove(job.id)
            raise
        return job

    def get(self, job_id: str) -> Job | None:
        job = self._store.get(job_id)
        return None if job is None else self._live(job)

    def page(self, *, after: str | None, limit: int, newest_first: bool) -> list[Job] | None:
        """`JobStore.page`, each job with its live progress."""
        jobs = self._store.page(after=after, limit=limit, newest_first=newest_first)
        return None if jobs is None else [self._live(job) for job in jobs]

    def delete(self, job_id: str) -> Job | None:
        """Cancels an unfinished job (a queued one now; a running one stops at its next step, or, in
        a batch that runs on for others, loses its video) and removes its files once it has
        stopped: it then reads `cancelled`. A finished job is forgotten with its files. Returns the
        job as it now is (a running one runs until its next step), a forgotten one as it was;
        None when there is none."""
        with self._lock:
            job = self._store.get(job_id)
            if job is None or job.status.finished:
                if job is not None:
                    self._store.remove(job_id)
                    self.files.remove(job_id)
                return job
            if not self._queue.remove(job_id):  # running: recorded cancelled before the answer
                if self._store.cancel(job_id):
                    self._cancelled.add(job_id)
                else:  # its run ended meanwhile (on another replica)
                    self._store.remove(job_id)
                self.files.remove(job_id)
                return job
        return self._finish(job, JobStatus.CANCELLED)

    def _live(self, job: Job) -> Job:
        with self._lock:
            progress = self._progress.get(job.id)
        if progress is None or job.status is not JobStatus.RUNNING:
            return job
        return attrs.evolve(job, steps_done=progress[0], steps_total=progress[1])

    def _recover(self) -> None:
        for job in self._store.unfinished():
            try:
                self.files.check_media(job.id, job.request["media"])
                request = queued_request(job.request, self._config)
                self._service.check([request])
            except (WanjaxError, OSError) as err:
                self._finish(job, JobStatus.FAILED, error=f"cannot be run by this server after its restart: {named_for(err, Entrypoint.HTTP)}")
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
            if self.store_error is not None and not self._store_back():
                self._stop.wait(STORE_RETRY_SECONDS)
                continue
            try:
                batch = self._queue.take(self._max_batch, timeout=0.2, fits=self._batch_fits)
            except StoreError as err:  # a shared store's queue is the store
                self.store_error = str(err)
                continue
            if batch:
                self._run(batch)

    def _batch_fits(self, request: GenerationRequest, batch: int) -> bool:
        try:
            self._check_memory(request, batch)
        except InvalidRequestError:
            return False
        return True

    def _store_back(self) -> bool:
        """Whether the store can be written again (then it is no longer reported)."""
        try:
            self._store.probe()
        except StoreError as err:
            self.store_error = str(err)
            return False
        self.store_error = None
        return True

    def _run(self, batch: Sequence[tuple[str, GenerationRequest]]) -> None:
        """Runs a batch; when the store cannot be written meanwhile, its jobs not yet recorded as
        finished go back to the head of the queue, to run once it can."""
        finished: set[str] = set()
        try:
            self._run_batch([job_id for job_id, _ in batch], finished)
        except StoreError as err:
            log.error("wanjax serve: %s", err)
            self.store_error = str(err)
            for job_id, _ in batch:
                self._forget_progress(job_id)
            self._queue.requeue([(job_id, request) for job_id, request in batch if job_id not in finished])

    def _run_batch(self, job_ids: Sequence[str], finished: set[str]) -> None:
        """Runs the jobs, their media decoded now, adding each to `finished` once its end is recorded."""
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
                self._step_seconds = now - last_step[0]
                self.metrics.step(self._step_seconds)
            last_step[0] = now
            with self._lock:
                self._progress.update({job_id: (done, total) for job_id in job_ids})
            if self._stop.is_set():
                raise RunInterrupted
            elsewhere = self._queue.stepped(job_ids, done, total)  # deleted through another replica
            with self._lock:
                self._cancelled.update(elsewhere)
                if self._cancelled.issuperset(job_ids):
                    raise JobCancelled

        def finish(job_id: str, status: JobStatus, **changes: Any) -> None:
            self._finish(jobs[job_id], status, **changes)
            finished.add(job_id)

        videos: list[JobVideo] = []
        try:
            try:
                requests = [self._decoded(jobs[job_id]) for job_id in job_ids]
                for job_id in job_ids:
                    videos.append(self.files.video_writer(job_id, self.fps))

                def on_frames(frames: np.ndarray) -> None:  # a segment of every video: written at once
                    for video, rows in zip(videos, frames, strict=True):
                        video.append(rows)

                result = self._service.generate_batch(requests, on_step=on_step, on_frames=on_frames)
                for video, job_id in zip(videos, job_ids, strict=True):
                    self._succeed(jobs[job_id], video, timings=result.trace.seconds)
                    finished.add(job_id)
            except BaseException:
                for video in videos:  # those committed hold nothing any more
                    video.discard()
                raise
        except JobCancelled:
            for job_id in job_ids:
                finish(job_id, JobStatus.CANCELLED)
        except RunInterrupted:
            for job_id in job_ids:
                if self._cancel_asked(job_id):
                    finish(job_id, JobStatus.CANCELLED)
                else:
                    self._forget_progress(job_id)
                    self._store.update(jobs[job_id].queued_again())
        except StoreError:
            raise
        except Exception as err:  # a failed batch fails its jobs, never the server
            if not isinstance(err, WanjaxError):
                log.exception("jobs %s failed", ", ".join(job_ids))
            for job_id in job_ids:
                if job_id not in finished:
                    finish(job_id, JobStatus.FAILED, error=f"{type(err).__name__}: {named_for(err, Entrypoint.HTTP)}")

    def _decoded(self, job: Job) -> GenerationRequest:
        """The job's request with its media read from its folder and decoded."""
        return request_from_record(job.request, self.files.read_media(job.id, job.request["media"]), self._config)

    def _cancel_asked(self, job_id: str) -> bool:
        with self._lock:
            return job_id in self._cancelled

    def _forget_progress(self, job_id: str) -> tuple[int, int]:
        with self._lock:
            return self._progress.pop(job_id, (0, 0))

    def _succeed(self, job: Job, video: JobVideo, **changes: Any) -> None:
        """Finishes the job's video and records it succeeded, the files renamed into place with the
        record written, only while this server holds the job (`JobStore.updating`). A job cancelled
        meanwhile ends cancelled; one this server lost (its lease lapsed and another replica took
        it over, or it was deleted) is left as the store has it. Either way no file of this run stays,
        not even the partial video written while it ran."""
        try:
            video.commit(committing=lambda: self._publishing(job, **changes))
        except JobLost:
            self._finish(job, JobStatus.CANCELLED)  # recorded where it was cancelled, not where it was lost

    @contextmanager
    def _publishing(self, job: Job, **changes: Any) -> Iterator[None]:
        """Enters while this server holds the job and it was not asked to stop (JobLost otherwise);
        records it succeeded as the block ends, under the lock `delete` takes."""
        with self._lock:
            if job.id in self._cancelled:
                raise JobLost(job.id)
            total = self._progress.get(job.id, (0, 0))[1]
            succeeded = attrs.evolve(job, status=JobStatus.SUCCEEDED, finished_at=self._clock(), steps_done=total,
                                     steps_total=total, **changes)  # fmt: skip
            with self._store.updating(succeeded):
                yield
            self._progress.pop(job.id, None)
        self.metrics.finished(succeeded.status.value, succeeded.finished_at - job.created_at)

    def _finish(self, job: Job, status: JobStatus, **changes: Any) -> Job:
        """Records the job's end (with its last progress) while this server holds it. A job asked to
        stop meanwhile ends cancelled whatever `status` says, and a cancelled job's files are
        removed as it is recorded: the check and the record are one step under the lock `delete`
        takes, so no deletion is lost. A job this server lost keeps its record and files (a deleted
        one's folder, made anew by a write of this run, is removed)."""
        done, total = self._forget_progress(job.id)
        with self._lock:
            if job.id in self._cancelled:
                self._cancelled.discard(job.id)
                status, changes = JobStatus.CANCELLED, {}
            finished = attrs.evolve(job, status=status, finished_at=self._clock(), steps_done=done, steps_total=total, **changes)
            try:
                with self._store.updating(finished):
                    if status is JobStatus.CANCELLED:
                        self.files.remove(job.id)
            except JobLost:
                self.files.remove_if_empty(job.id)
                log.warning("wanjax serve: job %s is no longer this server's (its lease lapsed and another replica took "
                            "it over, or it was deleted): nothing of this run was kept", job.id)  # fmt: skip
                return finished
        self.metrics.finished(status.value, finished.finished_at - job.created_at)
        return finished
