"""The SQLite job store: what is written is what a later process (after a kill) reads back."""

import sqlite3

import attrs

from wanjax.adapters.sqlite_jobs import SqliteJobStore
from wanjax.domain.jobs import Job, JobStatus


def _job(job_id, created_at, **changes):
    return Job(id=job_id, body='{"prompt": "a cat"}', created_at=created_at, **changes)


def test_a_job_reads_back_field_for_field_from_another_connection(tmp_path):
    path = tmp_path / "jobs.sqlite"
    job = _job("a", 10.0)
    SqliteJobStore(path).add(job)
    done = attrs.evolve(job, status=JobStatus.SUCCEEDED, started_at=11.0, finished_at=12.5, steps_done=4,
                        steps_total=4, output="/srv/a.mp4", timings={"denoise": 0.5})  # fmt: skip
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
