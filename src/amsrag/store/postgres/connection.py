"""Connecting to PostgreSQL: the timeouts, the read pool's size, the error a lost server gives, and a DSN with
its password redacted — shared by the passage store, its table store and the query log."""

from __future__ import annotations

import os
from collections.abc import Mapping
from urllib.parse import urlsplit, urlunsplit

import psycopg
from pgvector.psycopg import register_vector

from amsrag.errors import AmsragError, InputError

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
