"""The container's builders for the server's job store: SQLite in the output folder behind the
folder's lock, or PostgreSQL shared by replicas. Each imports its adapter inside."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from wanjax.domain.jobs import JobStoreSettings
from wanjax.domain.ports import JobStore, SharedJobStore

SQLITE_FILE = "jobs.sqlite"


def folder_lock(folder: Path) -> Iterator[BinaryIO]:
    """The output folder's lock (`adapters.folder_lock`: one server per folder), released at teardown."""
    from wanjax.adapters.folder_lock import lock_folder

    lock = lock_folder(folder)
    yield lock
    lock.close()


def sqlite_store(folder: Path, lock: BinaryIO) -> JobStore:
    """`folder`'s jobs.sqlite, opened once `lock` (the folder's) is held: no other server writes it."""
    from wanjax.adapters.sqlite_jobs import SqliteJobStore

    return SqliteJobStore(folder / SQLITE_FILE)


def postgres_store(settings: JobStoreSettings) -> SharedJobStore:
    """The PostgreSQL store at `settings.location`, its schema created or migrated; no folder lock:
    replicas share the output folder."""
    from wanjax.adapters.postgres_jobs import PostgresJobStore

    return PostgresJobStore(str(settings.location), lease_seconds=settings.lease_seconds)
