"""Connecting to PostgreSQL: the timeouts, the read pool's size, the error a lost server gives, a DSN with its
password redacted, and one connection shared by threads that reconnects once (`SharedConnection`) — used by
the passage store, its table store, the query log and the service's job records."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from typing import TypeVar
from urllib.parse import urlsplit, urlunsplit

import psycopg
from pgvector.psycopg import register_vector

from amsrag.errors import AmsragError, InputError

T = TypeVar("T")
CONNECT_TIMEOUT_S = 5.0

# The read pool, sized for `amsrag serve`: two admission lanes (retrieve, answer) of `serve.max_running`
# (default 4) engine calls each, every call holding at most one pooled connection at a time, plus the
# writer thread's reads and the outside-write watcher: 2 * 4 + 2. Writes open their own connection to the
# primary and are not counted. Overridden per process by AMSRAG_PG_POOL_MIN / AMSRAG_PG_POOL_MAX (for
# serve with a larger max_running: 2 * max_running + 2), or per index by `pool_min` / `pool_size`.
POOL_MIN = 2  # kept open (and checked) while idle: the first requests after a pause do not connect
POOL_MAX = 10
POOL_ENV = ("AMSRAG_PG_POOL_MIN", "AMSRAG_PG_POOL_MAX")


def pool_limits(pool_min: int | None = None, pool_max: int | None = None,
                env: Mapping[str, str] | None = None) -> tuple[int, int]:
    """(min, max) connections of the read pool: the arguments, else the environment, else the defaults."""
    env = os.environ if env is None else env
    out = []
    for given, name, default in ((pool_min, POOL_ENV[0], POOL_MIN), (pool_max, POOL_ENV[1], POOL_MAX)):
        if given is None and env.get(name, "").strip():
            try:
                given = int(env[name])
            except ValueError:
                raise InputError(f"{name} must be a whole number, got {env[name]!r}") from None
        out.append(default if given is None else int(given))
    low, high = out
    if high < 1 or low < 0:
        raise InputError(f"the PostgreSQL read pool needs max >= 1 and min >= 0 connections, got min {low}, "
                         f"max {high}")
    return min(low, high), high


class StoreUnavailableError(AmsragError):
    """The database cannot be reached or dropped the connection (after one retry)."""


def redact(dsn: str) -> str:
    """The URL without its password, for messages and stats."""
    parts = urlsplit(dsn)
    if parts.password is None:
        return dsn
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def configure_connection(conn: psycopg.Connection) -> None:
    """Every pooled connection: the pgvector types registered."""
    register_vector(conn)


def connect(dsn: str) -> psycopg.Connection:
    """An autocommit connection, or StoreUnavailableError naming the server (password redacted)."""
    try:
        return psycopg.connect(dsn, connect_timeout=int(CONNECT_TIMEOUT_S), autocommit=True)
    except psycopg.OperationalError as exc:
        raise StoreUnavailableError(f"cannot connect to PostgreSQL at {redact(dsn)}: {str(exc).strip()}") from exc


class SharedConnection:
    """One autocommit connection to `dsn`, shared by the caller's threads under a lock: opened on first use
    (`on_connect` runs on each new connection) and opened again once when it drops during a call."""

    def __init__(self, dsn: str, on_connect: Callable[[psycopg.Connection], None] | None = None) -> None:
        self.dsn = dsn
        self._on_connect = on_connect
        self._lock = threading.Lock()
        self._conn: psycopg.Connection | None = None

    def _connection(self) -> psycopg.Connection:
        if self._conn is None or self._conn.closed:
            conn = connect(self.dsn)
            if self._on_connect is not None:
                try:
                    self._on_connect(conn)
                except BaseException:
                    conn.close()
                    raise
            self._conn = conn
        return self._conn

    def run(self, fn: Callable[[psycopg.Connection], T]) -> T:
        """`fn` on the connection under the lock; once more on a new connection when the old one dropped."""
        with self._lock:
            for attempt in (1, 2):
                conn = self._connection()
                try:
                    return fn(conn)
                except psycopg.OperationalError:
                    if attempt == 2 or not conn.closed:
                        raise
                    self._conn = None
        raise AssertionError("unreachable")

    def close(self) -> None:
        """Close the connection (a later `run` opens a new one)."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
