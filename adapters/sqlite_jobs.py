"""The JobStore port (`domain.ports`) on SQLite (stdlib): one file, each write committed before it returns."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path

import attrs

from wanjax.domain.jobs import Job, JobStatus

_COLUMNS = tuple(f.name for f in attrs.fields(Job))
_SCHEMA = f"""CREATE TABLE IF NOT EXISTS jobs (
    position INTEGER PRIMARY KEY AUTOINCREMENT, {", ".join(f"{c} {'TEXT UNIQUE' if c == 'id' else ''}" for c in _COLUMNS)}
)"""


class SqliteJobStore:
    """Jobs in the table `jobs` of `path`, in the order they were accepted. Writes are synchronous
    (`synchronous=FULL`): an accepted job is on disk before the client hears of it."""

    def __init__(self, path: Path) -> None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        self._connection = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._connection.execute("PRAGMA journal_mode=WAL")
        self._connection.execute("PRAGMA synchronous=FULL")
        self._connection.execute(_SCHEMA)
        self._lock = threading.Lock()  # one connection, shared by the server's threads

    def add(self, job: Job) -> None:
        marks = ", ".join("?" * len(_COLUMNS))
        self._execute(f"INSERT INTO jobs ({', '.join(_COLUMNS)}) VALUES ({marks})", _row(job))

    def update(self, job: Job) -> None:
        assignments = ", ".join(f"{c} = ?" for c in _COLUMNS)
        self._execute(f"UPDATE jobs SET {assignments} WHERE id = ?", (*_row(job), job.id))

    def get(self, job_id: str) -> Job | None:
        rows = self._query("WHERE id = ?", (job_id,))
        return rows[0] if rows else None

    def unfinished(self) -> Sequence[Job]:
        return self._query("WHERE status IN (?, ?) ORDER BY position", (JobStatus.QUEUED.value, JobStatus.RUNNING.value))

    def _execute(self, sql: str, values: tuple[object, ...]) -> None:
        with self._lock:
            self._connection.execute(sql, values)

    def _query(self, where: str, values: tuple[object, ...]) -> list[Job]:
        with self._lock:
            rows = self._connection.execute(f"SELECT {', '.join(_COLUMNS)} FROM jobs {where}", values).fetchall()
        return [_job(row) for row in rows]


def _row(job: Job) -> tuple[object, ...]:
    values = attrs.asdict(job, recurse=False)
    values["status"] = job.status.value
    values["timings"] = json.dumps(job.timings)
    return tuple(values[c] for c in _COLUMNS)


def _job(row: tuple[object, ...]) -> Job:
    values = dict(zip(_COLUMNS, row))
    values["status"] = JobStatus(values["status"])
    values["timings"] = json.loads(str(values["timings"]))
    return Job(**values)
