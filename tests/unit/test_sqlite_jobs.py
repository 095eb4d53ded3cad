"""The SQLite job store: what is written is what a later process (after a kill) reads back."""

import sqlite3

import attrs
import pytest

from wanjax.adapters.sqlite_jobs import SqliteJobStore
from wanjax.domain.errors import ConfigError
from wanjax.domain.jobs import Job, JobStatus


def _job(job_id, created_at, **changes):
    return Job(id=job_id, request={"prompt": "a cat", "media": []}, created_at=created_at, **changes)


def test_a_job_reads_back_field_for_field_from_another_connection(tmp_path):
    path = tmp_path / "jobs.sqlite"
    job = _job("a", 10.0)
    SqliteJobStore(path).add(job)
    done = attrs.evolve(job, status=JobStatus.SUCCEEDED, started_at=11.0, finished_at=12.5, steps_done=4,
                        steps_total=4, timings={"denoise": 0.5})  # fmt: skip
    SqliteJobStore(path).update(done)

    assert SqliteJobStore(path).get("a") == done
    assert SqliteJobStore(path).get("never") is None


def test_unfinished_jobs_are_the_queued_and_running_ones_in_the_order_accepted(tmp_path):
    store = SqliteJobStore(tmp_path / "jobs.sqlite")
    for job_id, created_at, status in [("c", 3.0, JobStatus.QUEUED), ("a", 1.0, JobStatus.RUNNING),
                                       ("b", 2.0, JobStatus.SUCCEEDED), ("d", 4.0, JobStatus.FAILED),
                                       ("e", 5.0, JobStatus.CANCELLED), ("f", 6.0, JobStatus.QUEUED)]:  # fmt: skip
        store.add(_job(job_id, created_at, status=status))
    assert [job.id for job in store.unfinished()] == ["c", "a", "f"]


def test_a_row_written_before_a_kill_is_on_disk(tmp_path):
    """The store commits each write: a plain sqlite3 reader sees it while the writer is still open."""
    path = tmp_path / "jobs.sqlite"
    store = SqliteJobStore(path)
    store.add(_job("a", 1.0))
    store.update(_job("a", 1.0, status=JobStatus.RUNNING, started_at=2.0, steps_done=3))
    with sqlite3.connect(path) as reader:
        assert reader.execute("SELECT status, steps_done FROM jobs WHERE id = 'a'").fetchall() == [("running", 3)]


def test_a_page_of_jobs_follows_the_order_accepted_either_way_from_a_cursor(tmp_path):
    store = SqliteJobStore(tmp_path / "jobs.sqlite")
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


def test_a_table_of_another_version_is_refused_by_name(tmp_path):
    path = tmp_path / "jobs.sqlite"
    with sqlite3.connect(path) as old:
        old.execute("CREATE TABLE jobs (position INTEGER PRIMARY KEY, id TEXT, body TEXT)")
    with pytest.raises(ConfigError, match=f"{path} holds job records of another wanjax version"):
        SqliteJobStore(path)
