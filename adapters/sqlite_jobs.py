"""The JobStore port (`domain.ports`) on SQLite (stdlib): one file, each write committed before it
returns; checked when opened (readable, intact, writable), and every SQLite or file error raised as
a StoreError naming the file and the remedy."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import attrs

from wanjax.domain.errors import ConfigError, StoreError
from wanjax.domain.jobs import Job, JobLost, JobStatus

_COLUMNS = tuple(f.name for f in attrs.fields(Job))
_JSON_COLUMNS = ("request", "timings")
_SCHEMA = f"""CREATE TABLE IF NOT EXISTS jobs (
    position INTEGER PRIMARY KEY AUTOINCREMENT, {", ".join(f"{c} {'TEXT UNIQUE' if c == 'id' else ''}" for c in _COLUMNS)}
)"""
_PROBE_SCHEMA = "CREATE TABLE IF NOT EXISTS probe (bytes BLOB)"
_UPDATE = f"UPDATE jobs SET {', '.join(f'{c} = :{c}' for c in _COLUMNS)} WHERE id = :id"
_HELD = ("(status IN ('queued', 'running') OR (status = 'cancelled' AND :status = 'cancelled' "
         "AND finished_at IS NULL))")  # fmt: skip
"""A run's record, written only while its server holds it (`JobStore.update`): unfinished and not
cancelled, or cancelled and not yet ended, by its end."""
PROBE_BYTES = 8192
"""What a probe writes (and deletes again): two pages, so that a store out of space fails it."""
T = TypeVar("T")


class SqliteJobStore:
    """Jobs in the table `jobs` of `path`, in the order they were accepted. Writes are synchronous
    (`synchronous=FULL`): an accepted job is on disk before the client hears of it."""

    def __init__(self, path: Path) -> None:
        """Opens (or makes) the store and checks it: StoreError naming `path` and the remedy when it
        cannot be opened, is not an intact SQLite file, or cannot be written."""
        self.path = Path(path)
        self._lock = threading.Lock()  # one connection, shared by the server's threads
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._connection = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        except (sqlite3.Error, OSError) as err:
            raise self._error(err) from None
        self._guarded(self._open)
        _check_columns(self._connection, self.path)
        self.probe()

    def _open(self) -> None:
        connection = self._connection
        integrity = connection.execute("PRAGMA quick_check").fetchone()[0]
        if integrity != "ok":
            raise sqlite3.DatabaseError(f"damaged: {integrity}")
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA synchronous=FULL")
        connection.execute(_SCHEMA)
        connection.execute(_PROBE_SCHEMA)

    def probe(self) -> None:
        def write_and_delete() -> None:
            self._connection.execute("INSERT INTO probe VALUES (zeroblob(?))", (PROBE_BYTES,))
            self._connection.execute("DELETE FROM probe")

        self._guarded(write_and_delete)

    def add(self, job: Job) -> None:
        marks = ", ".join("?" * len(_COLUMNS))
        self._execute(f"INSERT INTO jobs ({', '.join(_COLUMNS)}) VALUES ({marks})", _row(job))

    def update(self, job: Job) -> bool:
        return self._guarded(lambda: self._connection.execute(f"{_UPDATE} AND {_HELD}", _written(job)).rowcount == 1)

    @contextmanager
    def updating(self, job: Job) -> Iterator[None]:
        """Under the connection's lock from the check to the write: this process is the store's one
        writer (the output folder's lock), so nothing else changes the record meanwhile."""
        with self._lock:
            held = self._converted(lambda: self._connection.execute(f"SELECT 1 FROM jobs WHERE id = :id AND {_HELD}",
                                                                    _written(job)).fetchone())  # fmt: skip
            if held is None:
                raise JobLost(job.id)
            yield
            self._converted(lambda: self._connection.execute(_UPDATE, _written(job)))

    def cancel(self, job_id: str) -> bool:
        sql = "UPDATE jobs SET status = 'cancelled' WHERE id = ? AND status IN ('queued', 'running')"
        return self._guarded(lambda: self._connection.execute(sql, (job_id,)).rowcount == 1)

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
            found = self._guarded(lambda: self._connection.execute("SELECT position FROM jobs WHERE id = ?", (after,)).fetchone())
            if found is None:
                return None
            where, values = f"WHERE position {beyond} ?", (found[0],)
        return self._query(f"{where} ORDER BY position {direction} LIMIT ?", (*values, limit))

    def _execute(self, sql: str, values: tuple[object, ...]) -> None:
        self._guarded(lambda: self._connection.execute(sql, values))

    def _query(self, where: str, values: tuple[object, ...]) -> list[Job]:
        rows = self._guarded(lambda: self._connection.execute(f"SELECT {', '.join(_COLUMNS)} FROM jobs {where}", values).fetchall())
        return [_job(row) for row in rows]

    def _guarded(self, action: Callable[[], T]) -> T:
        """`action()` under the connection's lock; its SQLite or file error as a StoreError."""
        with self._lock:
            return self._converted(action)

    def _converted(self, action: Callable[[], T]) -> T:
        """`action()`, its SQLite or file error as a StoreError."""
        try:
            return action()
        except (sqlite3.Error, OSError) as err:
            raise self._error(err) from None

    def _error(self, err: BaseException) -> StoreError:
        return StoreError(f"the job store {self.path} cannot be used ({err}); {_remedy(str(err))}")


def _remedy(reason: str) -> str:
    """What to do about SQLite's `reason`."""
    if "full" in reason:
        return "free disk space on its file system"
    if "readonly" in reason or "read-only" in reason or "unable to open" in reason or "ermission" in reason:
        return "make it and its folder writable by this user, or give another --output-dir"
    return "move it away (its job records are lost) or give another --output-dir"


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


def _written(job: Job) -> dict[str, object]:
    """The values `_UPDATE` and `_HELD` take for `job`."""
    return dict(zip(_COLUMNS, _row(job)))


def _job(row: tuple[object, ...]) -> Job:
    values = dict(zip(_COLUMNS, row))
    values["status"] = JobStatus(values["status"])
    for column in _JSON_COLUMNS:
        values[column] = json.loads(str(values[column]))
    return Job(**values)
