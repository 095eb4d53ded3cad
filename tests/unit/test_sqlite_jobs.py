"""The SQLite job store's own behaviour (the port's contract, for both stores, is in
test_job_stores.py): a write is on disk for a reader while the writer is open; a store that cannot
be written or read, and a folder another server holds, are refused by name."""

import os
import sqlite3

import pytest

from wanjax.adapters.folder_lock import lock_folder
from wanjax.adapters.sqlite_jobs import SqliteJobStore
from wanjax.domain.errors import ConfigError, StoreError
from wanjax.domain.jobs import Job, JobStatus


def _job(job_id, created_at, **changes):
    return Job(id=job_id, request={"prompt": "a cat", "media": []}, created_at=created_at, **changes)


def test_a_row_written_before_a_kill_is_on_disk(tmp_path):
    """The store commits each write: a plain sqlite3 reader sees it while the writer is still open."""
    path = tmp_path / "jobs.sqlite"
    store = SqliteJobStore(path)
    store.add(_job("a", 1.0))
    store.update(_job("a", 1.0, status=JobStatus.RUNNING, started_at=2.0, steps_done=3))
    with sqlite3.connect(path) as reader:
        assert reader.execute("SELECT status, steps_done FROM jobs WHERE id = 'a'").fetchall() == [("running", 3)]


def test_a_table_of_another_version_is_refused_by_name(tmp_path):
    path = tmp_path / "jobs.sqlite"
    with sqlite3.connect(path) as old:
        old.execute("CREATE TABLE jobs (position INTEGER PRIMARY KEY, id TEXT, body TEXT)")
    with pytest.raises(ConfigError, match=f"{path} holds job records of another wanjax version"):
        SqliteJobStore(path)


def test_a_full_disk_is_a_store_error_naming_the_file_and_the_remedy_and_writes_resume_after(tmp_path):
    path = tmp_path / "jobs.sqlite"
    store = SqliteJobStore(path)
    with sqlite3.connect(path) as other:  # SQLite's own "disk is full": no page may be added
        pages = other.execute("PRAGMA page_count").fetchone()[0]
    store._connection.execute(f"PRAGMA max_page_count = {pages}")  # noqa: SLF001 (the store's own connection)
    big = Job(id="big", request={"prompt": "a cat " * 5000, "media": []}, created_at=1.0)
    with pytest.raises(StoreError, match=f"the job store {path} cannot be used .*full.*; free disk space"):
        store.add(big)
    store._connection.execute("PRAGMA max_page_count = 1073741823")  # noqa: SLF001
    store.probe()
    store.add(big)
    assert store.get("big") == big


@pytest.mark.parametrize(
    ("contents", "remedy"),
    [(b"not a database at all" * 100, "move it away"), (None, "move it away")],
)
def test_a_damaged_store_is_refused_at_start_naming_the_file_and_the_remedy(tmp_path, contents, remedy):
    path = tmp_path / "jobs.sqlite"
    if contents is None:  # a store cut short: its first pages only
        store = SqliteJobStore(path)
        for index in range(200):
            store.add(_job(str(index), 1.0))
        store._connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # noqa: SLF001
        contents = path.read_bytes()[: 3 * 4096]
        for suffix in ("-wal", "-shm"):
            path.with_name(path.name + suffix).unlink(missing_ok=True)
    path.write_bytes(contents)
    with pytest.raises(StoreError, match=f"the job store {path} cannot be used .*; {remedy}"):
        SqliteJobStore(path)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes read-only files")
def test_a_read_only_store_is_refused_at_start(tmp_path):
    path = tmp_path / "jobs.sqlite"
    SqliteJobStore(path).add(_job("a", 1.0))
    path.chmod(0o444)
    with pytest.raises(StoreError, match="make it and its folder writable"):
        SqliteJobStore(path)


def test_a_second_server_on_the_folder_is_refused_naming_the_first(tmp_path):
    held = lock_folder(tmp_path)
    with pytest.raises(StoreError, match=f"the output folder {tmp_path} is in use by another wanjax serve \\(pid {os.getpid()}\\)"):
        lock_folder(tmp_path)
    held.close()
    lock_folder(tmp_path).close()  # free again once the first has gone
