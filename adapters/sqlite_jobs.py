"""The JobStore port (`domain.ports`) on SQLite (stdlib): one file, each write committed before it returns."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path

import attrs

from wanjax.domain.errors import ConfigError
from wanjax.domain.jobs import Job, JobStatus

_COLUMNS = tuple(f.name for f in attrs.fields(Job))
_JSON_COLUMNS = ("request", "timings")
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
        _check_columns(self._connection, Path(path))

    def add(self, job: Job) -> None:
        marks = ", ".join("?" * len(_COLUMNS))
        self._execute(f"INSERT INTO jobs ({', '.join(_COLUMNS)}) VALUES ({marks})", _row(job))

    def update(self, job: Job) -> None:
        assignments = ", ".join(f"{c} = ?" for c in _COLUMNS)
        self._execute(f"UPDATE jobs SET {assignments} WHERE id = ?", (*_row(job), job.id))

    def remove(self, job_id: str) -> None:
        self._execute("DELETE FROM jobs WHERE id = ?", (job_id,))

    def get(self, job_id: str) -> Job | None:
        rows = self._query("WHERE id = ?", (job_id,))
        return rows[0] if rows else None

    def unfinished(self) -> Sequence[Job]:
        return self._query("WHERE status IN (?, ?) ORDER BY position", (JobStatus.QUEUED.value, JobStatus.RUNNING.value))

    def page(self, *, after: str | None, limit: int, newest_first: bool) -> Sequence[Job] | None:
        """Up to `limit` jobs in the order accepted (`newest_first`: reversed), those after the job
        `after` when given; None when no job `after` exists."""
        direction, beyond = ("DESC", "<") if newest_first else ("ASC", ">")
        where, values = "", ()
        if after is not None:
            with self._lock:
                found = self._connection.execute("SELECT position FROM jobs WHERE id = ?", (after,)).fetchone()
            if found is None:
                return None
            where, values = f"WHERE position {beyond} ?", (found[0],)
        return self._query(f"{where} ORDER BY position {direction} LIMIT ?", (*values, limit))

    def _execute(self, sql: str, values: tuple[object, ...]) -> None:
        with self._lock:
            self._connection.execute(sql, values)

    def _query(self, where: str, values: tuple[object, ...]) -> list[Job]:
        with self._lock:
            rows = self._connection.execute(f"SELECT {', '.join(_COLUMNS)} FROM jobs {where}", values).fetchall()
        return [_job(row) for row in rows]


def _check_columns(connection: sqlite3.Connection, path: Path) -> None:
    """A table another version of wanjax wrote (other columns) is refused by name, not misread."""
    found = {row[1] for row in connection.execute("PRAGMA table_info(jobs)")} - {"position"}
    if found != set(_COLUMNS):
        raise ConfigError(
            f"{path} holds job records of another wanjax version (columns {sorted(found)}); "
            "move it away or give another --output-dir"
        )


def _row(job: Job) -> tuple[object, ...]:
    values = attrs.asdict(job, recurse=False)
    values["status"] = job.status.value
    for column in _JSON_COLUMNS:
        values[column] = json.dumps(values[column])
    return tuple(values[c] for c in _COLUMNS)


def _job(row: tuple[object, ...]) -> Job:
    values = dict(zip(_COLUMNS, row))
    values["status"] = JobStatus(values["status"])
    for column in _JSON_COLUMNS:
        values[column] = json.loads(str(values[column]))
    return Job(**values)
