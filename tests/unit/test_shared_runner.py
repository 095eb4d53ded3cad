"""Job runners on fake model components sharing one PostgreSQL store, as replicas do: every job
runs once on one of them, a DELETE through one stops the job the other runs, a runner that lost
its job writes nothing of it, and a store that fails is reported while the worker lives on, going
on by itself once the store is back."""

import time

import psycopg
import pytest
from fakes import FakeDenoiser, fake_service
from postgres import own_schema

from wanjax.adapters.postgres_jobs import PostgresJobStore
from wanjax.application.job_runner import JobRunner
from wanjax.application.store_queue import StoreQueue
from wanjax.domain.config import GenerationConfig
from wanjax.domain.errors import StoreError
from wanjax.domain.jobs import JobStatus

CONFIG = GenerationConfig.from_mapping(dict(height=64, width=96, num_frames=9, num_inference_steps=4, max_sequence_length=5))
WAIT = 30


class SlowDenoiser(FakeDenoiser):
    """Each step takes `seconds`; records the prompts' runs it finished."""

    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.seconds, self.finished, self.batch_sizes = seconds, 0, []

    def denoise(self, latents, plan, context, negative_context, on_step=None, conditioning=None):
        def slow(done, total):
            time.sleep(self.seconds)
            on_step(done, total)

        self.batch_sizes.append(len(latents))
        result = super().denoise(latents, plan, context, negative_context, slow, conditioning)
        self.finished += len(latents)
        return result


@pytest.fixture
def replicas(tmp_path):
    """Makes runners (started) over one store schema and one output folder; stops them after."""
    made = []
    with own_schema() as url:

        def replica(step_seconds=0.0, *, start=True):
            denoiser = SlowDenoiser(step_seconds)
            store = PostgresJobStore(url, lease_seconds=3)
            runner = JobRunner(fake_service(lambda: denoiser, max_sequence_length=5), CONFIG, store, output_dir=tmp_path,
                               queue_capacity=16, max_batch=2, queue=StoreQueue(store, CONFIG, capacity=16))  # fmt: skip
            if start:
                runner.start()
            made.append((runner, store))
            return runner, denoiser

        replica.url = url
        yield replica
        for runner, store in made:
            runner.stop(WAIT)
            store.close()


def _wait(runner, job_id, until=lambda job: job.status.finished):
    deadline = time.monotonic() + WAIT
    while not until(job := runner.get(job_id)):
        assert time.monotonic() < deadline, f"job {job_id} stayed {job.status.value}"
        time.sleep(0.01)
    return job


def test_every_job_runs_once_on_one_of_the_replicas(replicas):
    (first, first_model), (second, second_model) = replicas(0.05), replicas(0.05)
    accepted = [(first, second)[index % 2].submit({"prompt": f"job {index}", "seed": index}).id for index in range(12)]
    assert {_wait(second, job_id).status for job_id in accepted} == {JobStatus.SUCCEEDED}
    assert first_model.finished + second_model.finished == 12 and first_model.finished and second_model.finished
    assert all(first.files.video(job_id).is_file() for job_id in accepted)


def test_claims_batch_as_one_server_does_compatible_jobs_together_up_to_max_batch(replicas):
    accepting, _ = replicas(start=False)
    accepted = [accepting.submit({"prompt": f"job {index}", "height": 64 if index != 1 else 32}).id for index in range(4)]
    runner, model = replicas()
    assert {_wait(runner, job_id).status for job_id in accepted} == {JobStatus.SUCCEEDED}
    assert model.batch_sizes == [2, 1, 1]  # 0 and 2 together; 1 (another size) alone; 3 after it


def test_a_delete_through_one_replica_stops_the_job_the_other_runs(replicas):
    holder, model = replicas(0.05)
    job_id = holder.submit({"prompt": "long", "num_inference_steps": 400}).id
    _wait(holder, job_id, until=lambda job: job.steps_done > 0)
    other, _ = replicas()
    _wait(other, job_id, until=lambda job: job.steps_done > 0)  # the holder's progress, reported by the other
    other.delete(job_id)
    stopped = _wait(holder, job_id, until=lambda job: job.finished_at is not None)
    assert stopped.status is JobStatus.CANCELLED and stopped.steps_done < 400 and model.finished == 0


def test_a_replica_whose_job_was_taken_over_finished_and_deleted_brings_back_no_file_or_record(replicas, caplog):
    stale, model = replicas(0.05)
    job_id = stale.submit({"prompt": "long", "num_inference_steps": 40}).id
    _wait(stale, job_id, until=lambda job: job.steps_done > 0)
    with psycopg.connect(replicas.url, autocommit=True) as admin:  # as another replica that took it over and ended it
        admin.execute("UPDATE wanjax_jobs SET status = 'succeeded', owner = NULL, finished_at = 1 WHERE id = %s", (job_id,))
    other, _ = replicas()
    other.delete(job_id)  # a finished job: forgotten with its folder
    assert not other.files.folder(job_id).exists()
    deadline = time.monotonic() + WAIT
    while f"job {job_id} is no longer this server's" not in caplog.text:
        assert time.monotonic() < deadline, "the stale run never ended"
        time.sleep(0.01)
    assert model.finished == 1 and stale.get(job_id) is None and not stale.files.folder(job_id).exists()


def test_a_failing_store_is_reported_the_worker_lives_and_goes_on_once_it_is_back(replicas):
    runner, _ = replicas()
    with psycopg.connect(replicas.url, autocommit=True) as admin:
        admin.execute("ALTER TABLE wanjax_jobs RENAME TO wanjax_jobs_away")
        deadline = time.monotonic() + WAIT
        while runner.store_error is None:
            assert time.monotonic() < deadline, "the worker never met the store's error"
            time.sleep(0.05)
        with pytest.raises(StoreError, match="the job store postgresql://.* cannot be used"):
            runner.check_accepting()
        admin.execute("ALTER TABLE wanjax_jobs_away RENAME TO wanjax_jobs")
    deadline = time.monotonic() + WAIT
    while runner.store_error is not None:
        assert time.monotonic() < deadline, "the worker did not go on once the store was back"
        time.sleep(0.05)
    assert runner.working and _wait(runner, runner.submit({"prompt": "after"}).id).status is JobStatus.SUCCEEDED
