"""The JobStore contract, one suite for both stores (SQLite in a folder, PostgreSQL in a schema of
its own): what is written reads back from another connection, in the order accepted."""

import attrs
import pytest
from postgres import own_schema

from wanjax.adapters.postgres_jobs import PostgresJobStore
from wanjax.adapters.sqlite_jobs import SqliteJobStore
from wanjax.domain.jobs import Job, JobLost, JobStatus


def _job(job_id, created_at, **changes):
    request = {"prompt": "a cat", "media": [], "guidance_scale": 5.0}
    return Job(id=job_id, request=request, created_at=created_at, **changes)


@pytest.fixture(params=["sqlite", "postgresql"])
def opened(request, tmp_path):
    """A function that opens the store again (another connection, as another process would)."""
    if request.param == "sqlite":
        yield lambda: SqliteJobStore(tmp_path / "jobs.sqlite")
        return
    stores = []
    with own_schema() as url:

        def open_store():
            stores.append(PostgresJobStore(url, lease_seconds=30))
            return stores[-1]

        yield open_store
        for store in stores:
            store.close()


def _run(store, job):
    """Adds the job and makes this server its run's holder (where replicas share the store, by claiming it)."""
    store.add(job)
    if hasattr(store, "claim"):
        assert [claimed.id for claimed in store.claim(lambda jobs: jobs, candidates=1)] == [job.id]


def test_a_job_reads_back_field_for_field_from_another_connection(opened):
    job = _job("a", 10.0)
    store = opened()
    _run(store, job)
    done = attrs.evolve(job, status=JobStatus.SUCCEEDED, started_at=11.0, finished_at=12.5, steps_done=4,
                        steps_total=4, timings={"denoise": 0.5})  # fmt: skip
    assert store.update(done)

    assert opened().get("a") == done
    assert opened().get("never") is None


def test_unfinished_jobs_are_the_queued_and_running_ones_in_the_order_accepted(opened):
    store = opened()
    for job_id, created_at, status in [("c", 3.0, JobStatus.QUEUED), ("a", 1.0, JobStatus.RUNNING),
                                       ("b", 2.0, JobStatus.SUCCEEDED), ("d", 4.0, JobStatus.FAILED),
                                       ("e", 5.0, JobStatus.CANCELLED), ("f", 6.0, JobStatus.QUEUED)]:  # fmt: skip
        store.add(_job(job_id, created_at, status=status))
    assert [job.id for job in store.unfinished()] == ["c", "a", "f"]


def test_a_running_job_is_recorded_before_the_write_returns(opened):
    store = opened()
    _run(store, _job("a", 1.0))
    assert store.update(_job("a", 1.0, status=JobStatus.RUNNING, started_at=2.0, steps_done=3))
    assert (opened().get("a").status, opened().get("a").steps_done) == (JobStatus.RUNNING, 3)


def test_a_cancelled_job_is_written_once_by_its_end_and_a_finished_one_never(opened):
    store = opened()
    _run(store, _job("a", 1.0))
    running = _job("a", 1.0, status=JobStatus.RUNNING, started_at=2.0)
    assert store.update(running) and opened().cancel("a")
    assert not store.update(attrs.evolve(running, status=JobStatus.SUCCEEDED, finished_at=3.0))
    ended = attrs.evolve(running, status=JobStatus.CANCELLED, finished_at=4.0)
    assert store.update(ended) and not store.update(attrs.evolve(ended, finished_at=5.0))
    with pytest.raises(JobLost), store.updating(attrs.evolve(ended, finished_at=6.0)):
        pytest.fail("the block of a write that is refused ran")
    assert not opened().cancel("a") and not opened().cancel("never") and opened().get("a") == ended


def test_the_holders_output_is_published_with_its_record_and_not_when_the_block_fails(opened, tmp_path):
    store = opened()
    _run(store, _job("a", 1.0))
    done = _job("a", 1.0, status=JobStatus.SUCCEEDED, started_at=2.0, finished_at=3.0)
    with pytest.raises(OSError), store.updating(done):
        raise OSError("a rename failed")
    assert opened().get("a").status is not JobStatus.SUCCEEDED
    with store.updating(done):
        assert opened().get("a").status is not JobStatus.SUCCEEDED  # written as the block ends
    assert opened().get("a") == done


def test_a_page_of_jobs_follows_the_order_accepted_either_way_from_a_cursor(opened):
    store = opened()
    for job_id in "cabd":
        store.add(_job(job_id, 1.0))
    store.remove("b")

    def ids(**cursor):
        return [job.id for job in store.page(**cursor)]

    assert ids(after=None, limit=10, newest_first=False) == ["c", "a", "d"]
    assert ids(after=None, limit=2, newest_first=True) == ["d", "a"]
    assert ids(after="a", limit=10, newest_first=True) == ["c"]
    assert ids(after="c", limit=1, newest_first=False) == ["a"]
    assert store.page(after="b", limit=1, newest_first=False) is None  # removed: no cursor


def test_a_probe_writes_nothing_a_reader_sees(opened):
    store = opened()
    store.add(_job("a", 1.0))
    store.probe()
    assert [job.id for job in opened().page(after=None, limit=10, newest_first=False)] == ["a"]


def test_the_container_chooses_the_store_and_its_queue_and_locks_the_folder_for_sqlite_only(tmp_path):
    from wanjax.application.container import build_container
    from wanjax.application.job_queue import JobQueue
    from wanjax.application.store_queue import StoreQueue
    from wanjax.domain.config import GenerationConfig
    from wanjax.domain.errors import StoreError
    from wanjax.domain.jobs import JobStoreSettings

    config = GenerationConfig.from_mapping({})
    local = build_container(config, JobStoreSettings(output_dir=tmp_path))
    assert isinstance(local.job_store(), SqliteJobStore) and isinstance(local.job_queue(capacity=2), JobQueue)
    with pytest.raises(StoreError, match="is in use by another wanjax serve"):
        build_container(config, JobStoreSettings(output_dir=tmp_path)).job_store()
    with own_schema() as url:
        shared = [build_container(config, JobStoreSettings(output_dir=tmp_path, location=url)) for _ in range(2)]
        stores = [container.job_store() for container in shared]  # two replicas, on the folder SQLite holds
        assert all(isinstance(store, PostgresJobStore) for store in stores)
        assert isinstance(shared[0].job_queue(capacity=2), StoreQueue)
        for store in stores:
            store.close()


@pytest.mark.parametrize(("location", "lease", "named"), [("mysql://db/jobs", 30, "--jobs 'mysql://db/jobs'"),
                                                          ("postgresql://db/jobs", 0.5, "--lease-seconds 0.5")])  # fmt: skip
def test_a_store_that_is_not_postgresql_or_a_lease_too_short_is_refused_by_name(tmp_path, location, lease, named):
    from wanjax.domain.errors import ConfigError
    from wanjax.domain.jobs import JobStoreSettings

    with pytest.raises(ConfigError, match=named):
        JobStoreSettings(output_dir=tmp_path, location=location, lease_seconds=lease)
