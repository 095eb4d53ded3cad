"""The job runner on fake model components: jobs run, batch, cancel, stop gracefully and survive a
crash of the process (a store left with `running` rows)."""

from __future__ import annotations

import json
import sqlite3
import threading
import time

import numpy as np
import pytest
from fakes import FakeDenoiser, fake_service

from wanjax.adapters.media.video_files import Mp4Sink
from wanjax.adapters.sqlite_jobs import SqliteJobStore
from wanjax.application.job_queue import QueueFull
from wanjax.application.job_requests import request_record
from wanjax.application.job_runner import JobRunner
from wanjax.domain.config import GenerationConfig
from wanjax.domain.errors import CheckpointError, InvalidRequestError, StoreError
from wanjax.domain.jobs import Job, JobStatus

CONFIG = GenerationConfig.from_mapping(dict(height=64, width=96, num_frames=9, num_inference_steps=4, max_sequence_length=5))
WAIT = 30  # seconds a test waits for the worker before it fails (never reached when all is well)


class GatedDenoiser(FakeDenoiser):
    """Runs a step only once the test allows it (`allow`); `running` is set while a run is inside."""

    def __init__(self) -> None:
        super().__init__()
        self.allowed = threading.Semaphore(0)
        self.running = threading.Event()
        self.batch_sizes: list[int] = []

    def allow(self, steps: int = 1000) -> None:
        for _ in range(steps):
            self.allowed.release()

    def denoise(self, latents, plan, context, negative_context, on_step=None, conditioning=None):
        self.batch_sizes.append(len(latents))
        self.running.set()
        try:
            gated = lambda done, total: self._gate(on_step, done, total)  # noqa: E731
            return super().denoise(latents, plan, context, negative_context, gated, conditioning)
        finally:
            self.running.clear()

    def _gate(self, on_step, done, total):
        assert self.allowed.acquire(timeout=WAIT), "the test never allowed this step"
        if on_step is not None:
            on_step(done, total)


def _runner(tmp_path, denoiser, *, capacity=8, max_batch=4, load=None, on_load_failure=lambda error: None):
    service = fake_service(load or (lambda: denoiser), max_sequence_length=CONFIG.text_encoder.max_sequence_length)
    store = SqliteJobStore(tmp_path / "jobs.sqlite")
    return JobRunner(service, CONFIG, store, output_dir=tmp_path, queue_capacity=capacity, max_batch=max_batch,
                     on_load_failure=on_load_failure)  # fmt: skip


def _wait(runner, job_id, until=lambda job: job.status.finished) -> Job:
    deadline = time.monotonic() + WAIT
    while not until(job := runner.get(job_id)):
        assert time.monotonic() < deadline, f"job {job_id} stayed {job.status.value}"
        time.sleep(0.01)
    return job


@pytest.fixture
def denoiser():
    return GatedDenoiser()


def test_a_job_runs_to_a_video_with_its_progress_and_timings(tmp_path, denoiser):
    runner = _runner(tmp_path, denoiser)
    runner.start()
    denoiser.allow()
    job = _wait(runner, runner.submit({"prompt": "a cat", "seed": 3}).id)
    runner.stop()
    assert job.status is JobStatus.SUCCEEDED and (job.steps_done, job.steps_total) == (4, 4)
    assert runner.files.video(job.id).stat().st_size > 0 and runner.files.thumbnail(job.id).stat().st_size > 0
    assert "denoise" in job.timings and job.error is None


def test_a_bad_request_raises_naming_the_field_and_nothing_is_recorded(tmp_path, denoiser):
    runner = _runner(tmp_path, denoiser)
    with pytest.raises(InvalidRequestError, match="height"):
        runner.submit({"prompt": "a cat", "height": 65})
    assert SqliteJobStore(tmp_path / "jobs.sqlite").unfinished() == []


def test_past_capacity_a_submission_is_refused_and_not_recorded(tmp_path, denoiser):
    runner = _runner(tmp_path, denoiser, capacity=2)  # not started: nothing leaves the queue
    accepted = [runner.submit({"prompt": f"job {i}"}).id for i in range(2)]
    with pytest.raises(QueueFull):
        runner.submit({"prompt": "one too many"})
    assert [job.id for job in SqliteJobStore(tmp_path / "jobs.sqlite").unfinished()] == accepted


def test_compatible_queued_jobs_run_as_one_batch_and_others_after(tmp_path, denoiser):
    runner = _runner(tmp_path, denoiser, max_batch=3)
    first = runner.submit({"prompt": "first"}).id
    runner.start()
    _wait(runner, first, until=lambda job: job.status is JobStatus.RUNNING)
    later = [runner.submit({"prompt": f"later {i}", "seed": i}).id for i in range(4)]
    other = runner.submit({"prompt": "another size", "height": 128}).id
    denoiser.allow()
    jobs = [_wait(runner, job_id) for job_id in (first, *later, other)]
    runner.stop()
    assert {job.status for job in jobs} == {JobStatus.SUCCEEDED}
    assert denoiser.batch_sizes == [1, 3, 1, 1]  # the first alone; 3 of 4 later ones; the 4th; the other size


def test_a_batch_grows_only_as_far_as_its_memory_plan_fits_and_a_request_that_never_fits_is_refused(tmp_path, denoiser):
    def two_at_most(request, batch):
        if batch > 2 or request.height > 64:
            raise InvalidRequestError(f"this request needs about 99.0 GiB (a batch of {batch}); What would make it fit")

    service = fake_service(lambda: denoiser, max_sequence_length=CONFIG.text_encoder.max_sequence_length)
    runner = JobRunner(service, CONFIG, SqliteJobStore(tmp_path / "jobs.sqlite"), output_dir=tmp_path, queue_capacity=8,
                       max_batch=4, check_memory=two_at_most)  # fmt: skip
    with pytest.raises(InvalidRequestError, match="99.0 GiB"):
        runner.submit({"prompt": "too tall", "height": 128})
    ids = [runner.submit({"prompt": f"job {i}", "seed": i}).id for i in range(4)]
    runner.start()
    denoiser.allow()
    assert {_wait(runner, job_id).status for job_id in ids} == {JobStatus.SUCCEEDED}
    runner.stop()
    assert denoiser.batch_sizes == [2, 2]


def test_a_queued_job_is_cancelled_at_once_and_never_runs(tmp_path, denoiser):
    runner = _runner(tmp_path, denoiser)
    runner.start()
    running = runner.submit({"prompt": "running"}).id
    _wait(runner, running, until=lambda job: job.status is JobStatus.RUNNING)
    queued = runner.submit({"prompt": "queued", "height": 128}).id
    assert runner.delete(queued).status is JobStatus.CANCELLED
    denoiser.allow()
    assert _wait(runner, running).status is JobStatus.SUCCEEDED
    runner.stop()
    assert denoiser.batch_sizes == [1] and not runner.files.video(queued).exists()


def test_a_running_job_stops_at_its_next_step(tmp_path, denoiser):
    runner = _runner(tmp_path, denoiser)
    runner.start()
    job_id = runner.submit({"prompt": "running"}).id
    denoiser.allow(1)
    _wait(runner, job_id, until=lambda job: job.steps_done == 1)
    assert runner.delete(job_id).status is JobStatus.RUNNING  # asked to stop, not stopped yet
    # Recorded before the answer: a restart after a kill -9 now would not run it again.
    assert SqliteJobStore(tmp_path / "jobs.sqlite").get(job_id).status is JobStatus.CANCELLED
    assert not SqliteJobStore(tmp_path / "jobs.sqlite").unfinished()
    denoiser.allow(1)
    job = _wait(runner, job_id, until=lambda job: job.finished_at is not None)
    runner.stop()
    assert job.status is JobStatus.CANCELLED and job.steps_done == 2
    assert not runner.files.folder(job_id).exists()


class DecodingDenoiser(GatedDenoiser):
    """A GatedDenoiser whose run, its last step done (`decoding` set), returns once `release` is set:
    a long VAE decode, with no step callback meanwhile."""

    def __init__(self) -> None:
        super().__init__()
        self.decoding, self.release = threading.Event(), threading.Event()

    def denoise(self, *args, **kwargs):
        result = super().denoise(*args, **kwargs)
        self.decoding.set()
        assert self.release.wait(WAIT), "the test never released the decode"
        return result


def test_a_job_deleted_during_its_decode_ends_cancelled_with_no_file(tmp_path):
    denoiser = DecodingDenoiser()
    runner = _runner(tmp_path, denoiser)
    runner.start()
    job_id = runner.submit({"prompt": "a cat"}).id
    denoiser.allow()
    assert denoiser.decoding.wait(WAIT)
    runner.delete(job_id)
    denoiser.release.set()
    job = _wait(runner, job_id, until=lambda job: job.finished_at is not None)
    runner.stop()
    assert job.status is JobStatus.CANCELLED and not runner.files.folder(job_id).exists()


class FullStore(SqliteJobStore):
    """A store whose disk is full while `full` is set: every write (and probe) fails as the
    SQLite store's would (tests/unit/test_sqlite_jobs.py fills a real one)."""

    full = False

    def _written(self, write, *args):
        if self.full:
            raise StoreError(f"the job store {self.path} cannot be used (database or disk is full); free disk space")
        return write(*args)

    def add(self, job):
        self._written(super().add, job)

    def update(self, job):
        return self._written(super().update, job)

    def updating(self, job):
        return self._written(super().updating, job)

    def probe(self):
        self._written(super().probe)


def test_a_full_store_keeps_the_worker_alive_refuses_submissions_and_runs_the_job_once_it_can_write(tmp_path, denoiser):
    store = FullStore(tmp_path / "jobs.sqlite")
    runner = JobRunner(fake_service(lambda: denoiser, max_sequence_length=5), CONFIG, store, output_dir=tmp_path,
                       queue_capacity=8, max_batch=1)  # fmt: skip
    runner.start()
    job_id = runner.submit({"prompt": "a cat"}).id
    store.full = True
    denoiser.allow()
    deadline = time.monotonic() + WAIT
    while runner.store_error is None:
        assert time.monotonic() < deadline, "the store's failure was never noticed"
        time.sleep(0.01)
    assert "disk is full" in runner.store_error and runner.working
    with pytest.raises(StoreError, match="disk is full"):
        runner.submit({"prompt": "another"})
    assert runner.get(job_id).status is JobStatus.QUEUED  # not lost, not failed: it waits for the store
    store.full = False
    assert _wait(runner, job_id).status is JobStatus.SUCCEEDED and runner.store_error is None
    runner.stop()


def test_a_cancelled_job_of_a_batch_loses_its_video_and_the_others_keep_theirs(tmp_path, denoiser):
    runner = _runner(tmp_path, denoiser)
    ids = [runner.submit({"prompt": f"job {i}", "seed": i}).id for i in range(2)]
    runner.start()
    _wait(runner, ids[0], until=lambda job: job.status is JobStatus.RUNNING)
    runner.delete(ids[0])
    denoiser.allow()
    jobs = [_wait(runner, job_id) for job_id in ids]
    runner.stop()
    assert [job.status for job in jobs] == [JobStatus.CANCELLED, JobStatus.SUCCEEDED]
    assert denoiser.batch_sizes == [2] and not runner.files.video(ids[0]).exists()


def test_stop_ends_the_running_batch_at_its_next_step_and_queues_its_jobs_again(tmp_path, denoiser):
    runner = _runner(tmp_path, denoiser)
    runner.start()
    running = runner.submit({"prompt": "running"}).id
    denoiser.allow(1)
    _wait(runner, running, until=lambda job: job.steps_done == 1)
    queued = runner.submit({"prompt": "queued", "height": 128}).id
    stopping = threading.Thread(target=runner.stop)
    stopping.start()
    denoiser.allow(1)  # the step on the device finishes; the run stops after it
    stopping.join(WAIT)
    assert not stopping.is_alive()
    interrupted = runner.get(running)
    assert interrupted.status is JobStatus.QUEUED and interrupted.steps_done == 0 and interrupted.started_at is None
    assert runner.get(queued).status is JobStatus.QUEUED and denoiser.batch_sizes == [1]
    assert not runner.files.video(running).exists()

    fresh = GatedDenoiser()
    restarted = _runner(tmp_path, fresh)
    restarted.start()
    fresh.allow()
    assert [_wait(restarted, job_id).status for job_id in (running, queued)] == [JobStatus.SUCCEEDED] * 2
    restarted.stop()


def test_after_a_crash_running_and_queued_jobs_run_again_and_finished_ones_are_kept(tmp_path, denoiser):
    """The rows a killed process left: one running mid-way, one queued, one finished."""
    store = SqliteJobStore(tmp_path / "jobs.sqlite")
    record = request_record(CONFIG.request("a cat"))
    done = Job(id="done", request=record, created_at=1.0, status=JobStatus.SUCCEEDED, finished_at=2.0)
    store.add(done)
    store.add(Job(id="mid", request=record, created_at=3.0, status=JobStatus.RUNNING, started_at=4.0, steps_done=2))
    store.add(Job(id="waiting", request=request_record(CONFIG.request("a dog", height=128)), created_at=5.0))
    runner = _runner(tmp_path, denoiser)
    runner.start()
    assert runner.get("mid").status in (JobStatus.QUEUED, JobStatus.RUNNING)
    denoiser.allow()
    assert [_wait(runner, job_id).status for job_id in ("mid", "waiting")] == [JobStatus.SUCCEEDED] * 2
    runner.stop()
    assert runner.get("done") == done
    assert runner.files.video("mid").exists() and runner.files.video("waiting").exists()


def test_after_a_crash_a_job_this_server_cannot_run_fails_with_the_reason(tmp_path, denoiser):
    store = SqliteJobStore(tmp_path / "jobs.sqlite")
    record = {**request_record(CONFIG.request("a cat")), "height": 65}  # written by a server that took 65
    store.add(Job(id="odd", request=record, created_at=1.0, status=JobStatus.RUNNING))
    runner = _runner(tmp_path, denoiser)
    runner.start()
    job = runner.get("odd")
    runner.stop()
    assert job.status is JobStatus.FAILED and "after its restart" in job.error and "height" in job.error


def test_a_model_that_cannot_load_is_reported_and_queued_jobs_stay_queued(tmp_path, denoiser):
    failures = []

    def broken():
        raise CheckpointError("transformer/ holds no weights")

    runner = _runner(tmp_path, denoiser, load=broken, on_load_failure=failures.append)
    job_id = runner.submit({"prompt": "a cat"}).id
    runner.start()
    deadline = time.monotonic() + WAIT
    while not failures:
        assert time.monotonic() < deadline, "the load failure was never reported"
        time.sleep(0.01)
    runner.stop()
    assert runner.load_error is failures[0] and "no weights" in str(failures[0])
    assert not runner.ready and runner.get(job_id).status is JobStatus.QUEUED


class CountingStore(SqliteJobStore):
    """Counts the writes of each job's record."""

    def __init__(self, path) -> None:
        super().__init__(path)
        self.updates: dict[str, int] = {}

    def update(self, job: Job) -> bool:
        self.updates[job.id] = self.updates.get(job.id, 0) + 1
        return super().update(job)

    def updating(self, job: Job):
        self.updates[job.id] = self.updates.get(job.id, 0) + 1
        return super().updating(job)


def test_progress_lives_in_memory_and_the_store_hears_of_state_changes_only(tmp_path, denoiser):
    store = CountingStore(tmp_path / "jobs.sqlite")
    service = fake_service(lambda: denoiser, max_sequence_length=CONFIG.text_encoder.max_sequence_length)
    runner = JobRunner(service, CONFIG, store, output_dir=tmp_path, queue_capacity=2, max_batch=1)
    runner.start()
    job_id = runner.submit({"prompt": "a cat"}).id
    denoiser.allow(2)
    live = _wait(runner, job_id, until=lambda job: job.steps_done == 2)
    assert (live.status, live.steps_total) == (JobStatus.RUNNING, 4) and store.get(job_id).steps_done == 0
    denoiser.allow()
    done = _wait(runner, job_id)
    runner.stop()
    assert (done.steps_done, done.steps_total) == (4, 4) and store.get(job_id) == done
    assert store.updates[job_id] == 2  # running, then succeeded: none per step


def test_deleting_a_finished_job_forgets_it_and_its_files(tmp_path, denoiser):
    runner = _runner(tmp_path, denoiser)
    runner.start()
    denoiser.allow()
    job = _wait(runner, runner.submit({"prompt": "a cat"}).id)
    runner.stop()
    assert runner.files.folder(job.id).is_dir()
    assert runner.delete(job.id) == job
    assert runner.get(job.id) is None and not runner.files.folder(job.id).exists() and runner.delete(job.id) is None


def test_a_jobs_media_is_kept_as_a_file_beside_it_and_read_again_after_a_restart(tmp_path, denoiser):
    source = tmp_path / "source.mp4"
    Mp4Sink().write(np.full((9, 64, 96, 3), 90, np.uint8), source, fps=16)
    runner = _runner(tmp_path, denoiser)  # never started: the process ends with the job queued
    job = runner.submit({"prompt": "a cat", "strength": 0.5}, {"video": source.read_bytes()})
    assert (runner.files.folder(job.id) / "input-video").read_bytes() == source.read_bytes()
    with sqlite3.connect(tmp_path / "jobs.sqlite") as records:
        (request,) = records.execute("SELECT request FROM jobs").fetchone()
    assert json.loads(request)["media"] == ["video"] and len(request) < 1000  # the file's bytes are not in it

    restarted = _runner(tmp_path, denoiser)
    restarted.start()
    denoiser.allow()
    assert _wait(restarted, job.id).status is JobStatus.SUCCEEDED
    restarted.stop()
    assert denoiser.batch_sizes == [1] and denoiser.plans[0].num_steps == 2  # strength 0.5 of 4 steps
