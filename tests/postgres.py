"""A PostgreSQL for tests: a schema of its own in the database at $WANJAX_TEST_POSTGRES (by default
the `test` database on 127.0.0.1:5432 as user root, else postgres), dropped afterwards. Where none
answers, a test skips with one line saying so; with WANJAX_REQUIRE_POSTGRES=1 (.ci/run sets it)
it fails instead."""

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
import pytest

CANDIDATES = ("postgresql://root@127.0.0.1:5432/test", "postgresql://postgres@127.0.0.1:5432/test")


def database() -> str:
    """The URL of a database that answers; skips (or fails, when required) the test otherwise."""
    given = os.environ.get("WANJAX_TEST_POSTGRES")
    reasons = []
    for url in (given,) if given else CANDIDATES:
        try:
            psycopg.connect(url, connect_timeout=3).close()
            return url
        except psycopg.Error as err:
            reasons.append(f"{url}: {str(err).strip().splitlines()[0]}")
    message = f"no PostgreSQL reachable ({'; '.join(reasons)})"
    if os.environ.get("WANJAX_REQUIRE_POSTGRES") == "1":
        pytest.fail(f"{message}; WANJAX_REQUIRE_POSTGRES=1 makes that a failure", pytrace=False)
    pytest.skip(message)


@contextmanager
def own_schema() -> Iterator[str]:
    """A URL whose connections use a fresh schema (their search_path), dropped with its tables after."""
    url = database()
    name = f"wanjax_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f"CREATE SCHEMA {name}")
    try:
        yield f"{url}{'&' if '?' in url else '?'}options=-csearch_path%3D{name}"
    finally:
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(f"DROP SCHEMA {name} CASCADE")
