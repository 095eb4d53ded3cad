"""The SharedJobStore port (`domain.ports`) on PostgreSQL (psycopg 3): one table that replicas of
`wanjax serve` share as their job records and their queue. A replica claims jobs with
`FOR UPDATE SKIP LOCKED` (two never take the same one), holds each running job under a lease that a
thread of its own renews, and writes a job's record, or lets its run's files be renamed into place
(`updating`), only while it holds it (a replica that lost the job writes nothing). The schema is
created or migrated when the store opens; every psycopg error is raised as a StoreError naming the
database (never its password) and the remedy.

Hand-written SQL rather than a PostgreSQL job-queue library (procrastinate, pgqueuer): those bring
their own worker loop, task registry and tables, where this store has to feed the runner that
already batches, cancels and records jobs; the queue here is one table and a few statements."""

from __future__ import annotations

import logging
import math
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

import attrs
import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg.types.json import Jsonb

from wanjax.domain.errors import ConfigError, StoreError
from wanjax.domain.jobs import Job, JobLost, JobStatus

log = logging.getLogger(__name__)
TABLE = "wanjax_jobs"
_COLUMNS = tuple(f.name for f in attrs.fields(Job))
_JSON_COLUMNS = ("request", "timings")
MIGRATIONS = (
    f"""CREATE TABLE {TABLE} (
        position BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE, id TEXT PRIMARY KEY, request JSONB NOT NULL,
        status TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL, started_at DOUBLE PRECISION,
        finished_at DOUBLE PRECISION, steps_done INTEGER NOT NULL, steps_total INTEGER NOT NULL, error TEXT,
        timings JSONB NOT NULL, owner TEXT, lease_until TIMESTAMPTZ)""",
    f"CREATE INDEX {TABLE}_claimable ON {TABLE} (status, position)",
)
"""The schema, one statement per version: a store at version n runs those from n on, once."""
_SCHEMA_LOCK = 0x77616E6A  # the advisory lock replicas starting together migrate under, one at a time
_CLAIMABLE = "status = 'queued' OR (status = 'running' AND lease_until < now())"
_LEASE = "now() + make_interval(secs => %(lease)s)"
_UPDATE = (f"UPDATE {TABLE} SET {', '.join(f'{c} = %({c})s' for c in _COLUMNS if c != 'id')}, owner = %(owner)s, "
           f"lease_until = CASE WHEN %(status)s = 'running' THEN {_LEASE} END WHERE id = %(id)s")  # fmt: skip
_HELD = ("((status = 'running' AND owner = %(me)s) OR (status = 'cancelled' AND %(status)s = 'cancelled' "
         "AND finished_at IS NULL AND (owner = %(me)s OR owner IS NULL)))")  # fmt: skip
"""A run's record, written only while its replica holds it (`JobStore.update`): running under this
replica's claim, or cancelled and not yet ended, by the replica that ran it (or any, if none did)."""
T = TypeVar("T")


class PostgresJobStore:
    """Jobs in the table `wanjax_jobs` of the database at `url` (its schema: the connection's
    search_path), in the order accepted. `lease_seconds`: how long this replica's hold on a job it
    runs outlives its last renewal; it renews every third of that while the store is open."""

    def __init__(self, url: str, *, lease_seconds: float) -> None:
        """Connects, creates or migrates the schema and checks that it can write: StoreError naming
        the database when it cannot, ConfigError when a newer wanjax wrote its schema."""
        self.where = _where(url)
        self.owner = uuid.uuid4().hex
        """This replica's name on the jobs it holds: one per opened store."""
        self._url, self._lease = url, lease_seconds
        self._lock = threading.Lock()  # one connection, shared by the server's threads
        self._connection: psycopg.Connection | None = None
        self._held: set[str] = set()  # the running jobs this replica holds, whose leases it renews
        self._closed = threading.Event()
        self._guarded(self._migrate)
        self.probe()
        self._renewer = threading.Thread(target=self._renew_leases, name="wanjax-leases", daemon=True)
        self._renewer.start()

    def close(self) -> None:
        """Stops renewing (the held jobs' leases lapse) and closes the connection."""
        self._closed.set()
        self._renewer.join()
        with self._lock:
            if self._connection is not None:
                self._connection.close()

    def probe(self) -> None:
        """A write committed (the schema's version, unchanged), and the jobs' table there to read."""
        def read_and_write(connection: psycopg.Connection) -> None:
            connection.execute(f"SELECT 1 FROM {TABLE} LIMIT 0")
            connection.execute("UPDATE wanjax_schema SET version = version")

        self._guarded(read_and_write)

    def add(self, job: Job) -> None:
        names = ", ".join(_COLUMNS)
        self._execute(f"INSERT INTO {TABLE} ({names}) VALUES ({', '.join(f'%({c})s' for c in _COLUMNS)})", _row(job))

    def update(self, job: Job) -> bool:
        def write(connection: psycopg.Connection) -> bool:
            held = connection.execute(f"{_UPDATE} AND {_HELD}", values).rowcount == 1
            self._hold(job, held)
            return held

        values = self._written(job)
        return self._guarded(write)

    @contextmanager
    def updating(self, job: Job) -> Iterator[None]:
        """The row stays locked from the check to the write (claims skip it; a cancellation waits for
        the block), in a transaction that PostgreSQL ends if this process stalls in it for longer
        than its lease (paused, say), so that the lock cannot outlive the lease for long."""
        values = self._written(job)
        with self._connected() as connection, connection.transaction():
            connection.execute("SELECT set_config('idle_in_transaction_session_timeout', %s, true)",
                               (str(math.ceil(self._lease * 1000)),))  # fmt: skip
            if connection.execute(f"SELECT 1 FROM {TABLE} WHERE id = %(id)s AND {_HELD} FOR UPDATE", values).fetchone() is None:
                self._hold(job, False)
                raise JobLost(job.id)
            yield
            connection.execute(_UPDATE, values)
            self._hold(job, True)

    def cancel(self, job_id: str) -> bool:
        sql = f"UPDATE {TABLE} SET status = 'cancelled' WHERE id = %(id)s AND status IN ('queued', 'running')"
        return self._guarded(lambda c: c.execute(sql, {"id": job_id}).rowcount == 1)

    def _written(self, job: Job) -> dict[str, Any]:
        """The values `_UPDATE` and `_HELD` take for `job`."""
        running = job.status is JobStatus.RUNNING
        return {**_row(job), "owner": self.owner if running else None, "me": self.owner, "lease": self._lease}

    def _hold(self, job: Job, written: bool) -> None:
        """Renews the lease of a job this replica now holds running, and no other (under the lock)."""
        if written and job.status is JobStatus.RUNNING:
            self._held.add(job.id)
        else:
            self._held.discard(job.id)

    def remove(self, job_id: str) -> None:
        self._execute(f"DELETE FROM {TABLE} WHERE id = %(id)s", {"id": job_id})

    def get(self, job_id: str) -> Job | None:
        rows = self._query("WHERE id = %(id)s", {"id": job_id})
        return rows[0] if rows else None

    def unfinished(self) -> Sequence[Job]:
        return self._query("WHERE status IN ('queued', 'running') ORDER BY position", {})

    def page(self, *, after: str | None, limit: int, newest_first: bool) -> Sequence[Job] | None:
        direction, beyond = ("DESC", "<") if newest_first else ("ASC", ">")
        where = ""
        if after is not None:
            if self.get(after) is None:
                return None
            where = f"WHERE position {beyond} (SELECT position FROM {TABLE} WHERE id = %(after)s)"
        return self._query(f"{where} ORDER BY position {direction} LIMIT %(limit)s", {"after": after, "limit": limit})

    def claim(self, choose: Callable[[Sequence[Job]], Sequence[Job]], *, candidates: int) -> Sequence[Job]:
        def take(connection: psycopg.Connection) -> list[Job]:
            with connection.transaction():
                rows = connection.execute(
                    f"SELECT {', '.join(_COLUMNS)} FROM {TABLE} WHERE {_CLAIMABLE} ORDER BY position "
                    "LIMIT %(candidates)s FOR UPDATE SKIP LOCKED", {"candidates": candidates},
                ).fetchall()  # fmt: skip
                offered = [_job(row).queued_again() for row in rows]
                chosen = [attrs.evolve(job, status=JobStatus.RUNNING) for job in choose(offered)]
                ids = [job.id for job in chosen]
                connection.execute(
                    f"UPDATE {TABLE} SET status = 'running', started_at = NULL, steps_done = 0, owner = %(me)s, "
                    f"lease_until = {_LEASE} WHERE id = ANY(%(ids)s)",
                    {"me": self.owner, "lease": self._lease, "ids": ids},
                )  # fmt: skip
            self._held.update(ids)  # under the lock: `_guarded` holds it
            return chosen

        return self._guarded(take)

    def release(self, job_ids: Sequence[str]) -> None:
        with self._lock:
            self._held.difference_update(job_ids)
        self._execute(
            f"UPDATE {TABLE} SET status = 'queued', started_at = NULL, steps_done = 0, owner = NULL, "
            "lease_until = NULL WHERE id = ANY(%(ids)s) AND status = 'running' AND owner = %(me)s",
            {"ids": list(job_ids), "me": self.owner},
        )

    def queued_count(self) -> int:
        return self._guarded(lambda c: c.execute(f"SELECT count(*) FROM {TABLE} WHERE status = 'queued'").fetchone()[0])

    def cancel_queued(self, job_id: str) -> bool:
        sql = f"UPDATE {TABLE} SET status = 'cancelled' WHERE id = %(id)s AND status = 'queued'"
        return self._guarded(lambda c: c.execute(sql, {"id": job_id}).rowcount == 1)

    def stepped(self, job_ids: Sequence[str], done: int, total: int) -> set[str]:
        sql = (f"WITH stepped AS (UPDATE {TABLE} SET steps_done = %(done)s, steps_total = %(total)s "
               "WHERE id = ANY(%(ids)s) AND owner = %(me)s AND status = 'running') "
               f"SELECT id FROM {TABLE} WHERE id = ANY(%(ids)s) AND status = 'cancelled'")  # fmt: skip
        values = {"ids": list(job_ids), "done": done, "total": total, "me": self.owner}
        return {row[0] for row in self._guarded(lambda c: c.execute(sql, values).fetchall())}

    def _renew_leases(self) -> None:
        """Every third of the lease, pushes back the lease of each job this replica holds."""
        sql = (f"UPDATE {TABLE} SET lease_until = {_LEASE} "
               "WHERE id = ANY(%(ids)s) AND owner = %(me)s AND status = 'running'")  # fmt: skip
        while not self._closed.wait(self._lease / 3):
            try:
                self._guarded(lambda c: c.execute(sql, {"ids": list(self._held), "me": self.owner,
                                                        "lease": self._lease}))  # fmt: skip
            except StoreError as err:  # the worker meets it too; the leases lapse unless a later try works
                log.error("wanjax serve: %s", err)

    def _migrate(self, connection: psycopg.Connection) -> None:
        with connection.transaction():
            connection.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
            connection.execute("CREATE TABLE IF NOT EXISTS wanjax_schema (version INTEGER NOT NULL)")
            row = connection.execute("SELECT version FROM wanjax_schema").fetchone()
            version = 0 if row is None else row[0]
            if version > len(MIGRATIONS):
                raise ConfigError(f"the job store {self.where} was written by a newer wanjax (schema {version}, "
                                  f"this one knows {len(MIGRATIONS)}); upgrade this replica, or give another "
                                  "database")  # fmt: skip
            for statement in MIGRATIONS[version:]:
                connection.execute(statement)
            if row is None:
                connection.execute("INSERT INTO wanjax_schema VALUES (%s)", (len(MIGRATIONS),))
            else:
                connection.execute("UPDATE wanjax_schema SET version = %s", (len(MIGRATIONS),))

    def _execute(self, sql: str, values: dict[str, Any]) -> None:
        self._guarded(lambda connection: connection.execute(sql, values))

    def _query(self, where: str, values: dict[str, Any]) -> list[Job]:
        sql = f"SELECT {', '.join(_COLUMNS)} FROM {TABLE} {where}"
        return [_job(row) for row in self._guarded(lambda connection: connection.execute(sql, values).fetchall())]

    def _guarded(self, action: Callable[[psycopg.Connection], T]) -> T:
        """`action(connection)` on `_connected`'s connection."""
        with self._connected() as connection:
            return action(connection)

    @contextmanager
    def _connected(self) -> Iterator[psycopg.Connection]:
        """The connection, under the lock, connecting first when there is no live one; a psycopg
        error as a StoreError (and the next use connects afresh)."""
        with self._lock:
            try:
                if self._connection is None or self._connection.closed:
                    self._connection = psycopg.connect(self._url, autocommit=True, connect_timeout=5)
                yield self._connection
            except psycopg.Error as err:
                if self._connection is not None and self._connection.broken:
                    self._connection.close()
                raise StoreError(f"the job store {self.where} cannot be used ({' '.join(str(err).split())}); check that "
                                 "PostgreSQL runs and this user may connect and write there") from None  # fmt: skip


def _where(url: str) -> str:
    """The database `url` names, without its password: `postgresql://USER@HOST:PORT/DATABASE`."""
    try:
        parts = conninfo_to_dict(url)
    except psycopg.Error as err:
        raise ConfigError(f"--jobs: not a PostgreSQL URL ({err}); give postgresql://USER@HOST:PORT/DATABASE") from None
    user = f"{parts['user']}@" if "user" in parts else ""
    return f"postgresql://{user}{parts.get('host', '')}:{parts.get('port', 5432)}/{parts.get('dbname', '')}"


def _row(job: Job) -> dict[str, Any]:
    values = attrs.asdict(job, recurse=False)
    values["status"] = job.status.value
    for column in _JSON_COLUMNS:
        values[column] = Jsonb(values[column])
    return values


def _job(row: tuple[Any, ...]) -> Job:
    values = dict(zip(_COLUMNS, row))
    values["status"] = JobStatus(values["status"])
    return Job(**values)
