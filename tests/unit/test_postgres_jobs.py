"""The PostgreSQL store as replicas share it: two never claim the same job, a lease renewed while
its replica lives and lapsed when it dies, a lost job's record untouched by the replica that lost
it, cancellation seen by any replica, the schema made or migrated at start, errors named."""

import threading
import time

import attrs
import psycopg
import pytest
from postgres import own_schema

from wanjax.adapters.postgres_jobs import MIGRATIONS, PostgresJobStore
from wanjax.domain.errors import ConfigError, StoreError
from wanjax.domain.jobs import Job, JobLost, JobStatus

LEASE = 1.5


@pytest.fixture
def url():
    with own_schema() as url:
        yield url


@pytest.fixture
def replicas(url):
    """Opens stores on the same database, as replicas do; each closed after the test."""
    opened = []

    def open_replica(lease_seconds=LEASE):
        opened.append(PostgresJobStore(url, lease_seconds=lease_seconds))
        return opened[-1]

    yield open_replica
    for store in opened:
        store.close()


def _job(job_id, created_at=1.0):
    return Job(id=job_id, request={"prompt": job_id, "media": []}, created_at=created_at)


def _all(jobs):
    return list(jobs)


def test_replicas_claiming_at_once_never_take_the_same_job(replicas):
    stores = [replicas() for _ in range(3)]
    for index in range(60):
        stores[0].add(_job(f"j{index:02}", index))
    taken = {id(store): [] for store in stores}

    def work(store):
        while claimed := store.claim(lambda jobs: jobs[:2], candidates=4):
            taken[id(store)].extend(job.id for job in claimed)

    threads = [threading.Thread(target=work, args=(store,)) for store in stores]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    every = [job_id for ids in taken.values() for job_id in ids]
    assert sorted(every) == [f"j{index:02}" for index in range(60)]  # each once, none left
    assert {job.status for job in stores[0].unfinished()} == {JobStatus.RUNNING}


def test_a_claim_takes_what_choose_returns_oldest_first_and_leaves_the_rest_queued(replicas):
    store = replicas()
    for job_id, created_at in [("b", 2.0), ("a", 1.0), ("c", 3.0)]:
        store.add(_job(job_id, created_at))
    seen = []
    claimed = store.claim(lambda jobs: seen.extend(job.id for job in jobs) or [jobs[0], jobs[2]], candidates=10)
    assert seen == ["b", "a", "c"]  # the order accepted
    assert [(job.id, job.status) for job in claimed] == [("b", JobStatus.RUNNING), ("c", JobStatus.RUNNING)]
    assert store.queued_count() == 1 and store.get("a").status is JobStatus.QUEUED


def test_a_lease_renewed_while_its_replica_lives_lapses_when_it_dies_and_the_job_runs_again(replicas):
    first, second = replicas(), replicas()
    first.add(_job("a"))
    first.claim(_all, candidates=1)
    time.sleep(2 * LEASE)  # renewed meanwhile, every LEASE / 3
    assert second.claim(_all, candidates=1) == []
    first.close()  # as a killed replica: no more renewals, nothing released
    time.sleep(LEASE + 0.5)
    again = second.claim(_all, candidates=1)
    assert [(job.id, job.status, job.steps_done) for job in again] == [("a", JobStatus.RUNNING, 0)]


def test_a_replica_that_lost_its_job_changes_nothing_of_its_record_running_or_ended_and_publishes_nothing(replicas):
    first, second = replicas(), replicas()
    first.add(_job("a"))
    [job] = first.claim(_all, candidates=1)
    first.close()
    time.sleep(LEASE + 0.5)
    [taken] = second.claim(_all, candidates=1)
    stale = replicas()
    stale.owner = first.owner
    published = []

    def stale_writes_refused():
        for status in JobStatus:
            written = attrs.evolve(job, status=status, started_at=7.0, finished_at=9.0)
            assert not stale.update(written)
            with pytest.raises(JobLost), stale.updating(written):
                published.append(status)
        stale.release(["a"])

    stale_writes_refused()
    assert second.get("a").status is JobStatus.RUNNING and second.get("a").finished_at is None
    done = attrs.evolve(taken, status=JobStatus.SUCCEEDED, started_at=2.0, finished_at=3.0)
    assert second.update(done)
    stale_writes_refused()  # the holder's end, as the issue found it rewritten
    assert second.get("a") == done and published == []


def test_a_write_with_its_output_keeps_the_job_from_others_until_it_ends_or_outlasts_the_lease(replicas):
    holder, other, reader = replicas(), replicas(), replicas()  # `other` waits on its connection: another reads
    holder.add(_job("a"))
    [job] = holder.claim(_all, candidates=1)
    cancelled = []
    cancelling = threading.Thread(target=lambda: cancelled.append(other.cancel("a")))
    with holder.updating(attrs.evolve(job, status=JobStatus.SUCCEEDED, finished_at=5.0)):
        cancelling.start()
        cancelling.join(LEASE / 3)
        assert cancelling.is_alive() and reader.get("a").status is JobStatus.RUNNING  # waits for the write
    cancelling.join()
    assert cancelled == [False] and other.get("a").status is JobStatus.SUCCEEDED

    holder.add(_job("b"))
    [job] = holder.claim(_all, candidates=1)
    with pytest.raises(StoreError), holder.updating(attrs.evolve(job, status=JobStatus.SUCCEEDED)):
        time.sleep(LEASE + 1)  # as a paused process: PostgreSQL ends its transaction, the row's lock with it
    assert other.cancel("b") and other.get("b").status is JobStatus.CANCELLED


def test_a_cancellation_is_seen_by_every_replica_and_outlasts_the_holders_writes(replicas):
    holder, other = replicas(), replicas()
    for job_id in "ab":
        holder.add(_job(job_id))
    [running] = holder.claim(lambda jobs: jobs[:1], candidates=2)
    assert holder.stepped(["a"], 3, 8) == set() and other.get("a").steps_done == 3  # its progress, for all
    assert other.cancel_queued("b") and not other.cancel_queued("a")  # "a" runs: not queued
    assert other.cancel("a")
    assert holder.stepped(["a", "b"], 4, 8) == {"a", "b"} and other.get("a").steps_done == 3
    assert not holder.update(attrs.evolve(running, status=JobStatus.SUCCEEDED))
    assert holder.update(attrs.evolve(running, status=JobStatus.CANCELLED, finished_at=5.0))  # its end, by its holder
    assert other.get("a").status is JobStatus.CANCELLED and other.get("a").finished_at == 5.0
    assert holder.claim(_all, candidates=5) == []  # a cancelled job is never claimed


def test_a_released_job_is_queued_again_at_once(replicas):
    first, second = replicas(), replicas()
    first.add(_job("a"))
    first.claim(_all, candidates=1)
    first.release(["a"])
    assert [job.id for job in second.claim(_all, candidates=1)] == ["a"]


def test_the_schema_is_made_once_by_replicas_starting_together_and_a_newer_one_is_refused(url, replicas):
    errors = []

    def start():
        try:
            replicas()
        except Exception as err:  # noqa: BLE001 (the test reports any)
            errors.append(err)

    threads = [threading.Thread(target=start) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    with psycopg.connect(url, autocommit=True) as connection:
        assert connection.execute("SELECT version FROM wanjax_schema").fetchall() == [(len(MIGRATIONS),)]
        connection.execute("UPDATE wanjax_schema SET version = version + 1")
    with pytest.raises(ConfigError, match="was written by a newer wanjax"):
        replicas()


def test_an_unreachable_database_is_a_store_error_naming_it_without_its_password():
    with pytest.raises(StoreError, match=r"the job store postgresql://wanjax@127.0.0.1:9/jobs cannot be used") as raised:
        PostgresJobStore("postgresql://wanjax:hunter2@127.0.0.1:9/jobs?connect_timeout=2", lease_seconds=30)
    assert "hunter2" not in str(raised.value)


def test_a_store_of_an_older_schema_is_migrated_at_start_keeping_its_jobs(url, replicas):
    replicas().add(_job("kept"))
    with psycopg.connect(url, autocommit=True) as connection:  # as the first schema version left it
        connection.execute("DROP INDEX wanjax_jobs_claimable")
        connection.execute("UPDATE wanjax_schema SET version = 1")
    assert replicas().get("kept") == _job("kept")
    with psycopg.connect(url, autocommit=True) as connection:
        assert connection.execute("SELECT version FROM wanjax_schema").fetchall() == [(len(MIGRATIONS),)]
        assert connection.execute("SELECT to_regclass('wanjax_jobs_claimable') IS NOT NULL").fetchone() == (True,)
