"""The query log of a PostgreSQL index: the `amsrag.query_log` table, created when missing.

Outside the store's numbered migrations on purpose: the log is opt-in, and a server that logs must not
need a schema upgrade of the index (or its write lock) to start. One connection to the primary, shared
by the caller's threads under a lock and opened again once when it drops; every append and prune is one
transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from functools import partial
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from amsrag.querylog.base import PAGE, PRUNE_INTERVAL, cutoff, time_range
from amsrag.querylog.entry import COLUMNS, JSON_COLUMNS, QueryLogEntry, utc
from amsrag.store.postgres.connection import SharedConnection, redact
from amsrag.store.postgres.schema import SCHEMA

TABLE = f"{SCHEMA}.query_log"
META = f"{SCHEMA}.query_log_meta"
CREATE_LOCK_KEY = 0x616D716C  # "amql": serialises the CREATE ... IF NOT EXISTS of concurrent first opens

_SCHEMA = f"""
CREATE SCHEMA IF NOT EXISTS {SCHEMA};
CREATE TABLE IF NOT EXISTS {TABLE} (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    ts timestamptz NOT NULL,
    source text NOT NULL,
    system text NOT NULL,
    query text NOT NULL,
    language text,
    label text,
    alpha float8,
    route_label text,
    route_alpha float8,
    strategy text NOT NULL,
    retrievers jsonb NOT NULL,
    retriever_calls integer NOT NULL,
    escalations integer NOT NULL,
    corrective_action text,
    abstained boolean NOT NULL,
    answer text,
    citations jsonb NOT NULL,
    generator text,
    confidence float8,
    total_ms float8,
    timings jsonb NOT NULL,
    signals jsonb NOT NULL,
    audit jsonb,
    flagged boolean NOT NULL,
    version text NOT NULL
);
CREATE INDEX IF NOT EXISTS query_log_ts ON {TABLE} (ts);
CREATE INDEX IF NOT EXISTS query_log_flagged ON {TABLE} (ts) WHERE flagged;
CREATE TABLE IF NOT EXISTS {META} (key text PRIMARY KEY, value jsonb NOT NULL);
INSERT INTO {META} VALUES ('schema_version', '1') ON CONFLICT DO NOTHING;
"""

_INSERT = f"INSERT INTO {TABLE} ({', '.join(COLUMNS)}) VALUES ({', '.join(['%s'] * len(COLUMNS))}) RETURNING id"
_SELECT = f"SELECT id, {', '.join(COLUMNS)} FROM {TABLE}"


def _param(name: str, value: Any) -> Any:
    if name in JSON_COLUMNS:
        return None if value is None else Jsonb(value)
    return value


def _entry(row: tuple[Any, ...]) -> QueryLogEntry:
    values: dict[str, Any] = dict(zip(("id", *COLUMNS), row, strict=True))
    values["ts"] = utc(values["ts"])
    return QueryLogEntry(**values)


def _fetch(sql: str, args: list[Any], conn: psycopg.Connection) -> list[tuple[Any, ...]]:
    return conn.execute(sql, args).fetchall()


class PostgresQueryLog:
    def __init__(self, dsn: str, retention_days: float = 30.0,
                 clock: Callable[[], datetime] | None = None) -> None:
        """`clock`: the time of appends (the prune schedule), UTC now by default."""
        self.dsn = dsn
        self._clock = clock or (lambda: datetime.now(UTC))
        self.location = redact(dsn)
        self.retention_days = retention_days
        self._connection = SharedConnection(dsn)
        self._run = self._connection.run
        self._next_prune_check: datetime | None = None
        self._run(self._create)

    def close(self) -> None:
        self._connection.close()

    def __enter__(self) -> PostgresQueryLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @staticmethod
    def _create(conn: psycopg.Connection) -> None:
        row = conn.execute("SELECT to_regclass(%s) IS NOT NULL AND to_regclass(%s) IS NOT NULL",
                           (TABLE, META)).fetchone()
        if row is not None and row[0]:
            return
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (CREATE_LOCK_KEY,))
            conn.execute(_SCHEMA)

    # ---- writes --------------------------------------------------------------------
    def append(self, entry: QueryLogEntry) -> int:
        now = utc(self._clock())
        params = [_param(c, getattr(entry, c)) for c in COLUMNS]

        def append(conn: psycopg.Connection) -> int:
            with conn.transaction():
                if self._next_prune_check is None or now >= self._next_prune_check:
                    self._prune_if_due(conn, now)
                row = conn.execute(_INSERT, params).fetchone()
            assert row is not None
            return int(row[0])

        return self._run(append)

    def _prune_if_due(self, conn: psycopg.Connection, now: datetime) -> None:
        """In the caller's transaction: prune when no process has for an hour (one claims the turn)."""
        claimed = conn.execute(
            f"INSERT INTO {META} AS m VALUES ('last_prune', to_jsonb(%s::timestamptz)) ON CONFLICT (key) DO UPDATE "
            f"SET value = excluded.value WHERE (m.value #>> '{{}}')::timestamptz <= %s RETURNING 1",
            (now, now - PRUNE_INTERVAL)).fetchone()
        if claimed is not None:
            self._delete_before(conn, cutoff(self.retention_days, now))
            self._next_prune_check = now + PRUNE_INTERVAL
            return
        row = conn.execute(f"SELECT (value #>> '{{}}')::timestamptz FROM {META} WHERE key = 'last_prune'").fetchone()
        self._next_prune_check = (utc(row[0]) if row else now) + PRUNE_INTERVAL

    @staticmethod
    def _delete_before(conn: psycopg.Connection, oldest: datetime | None) -> int:
        if oldest is None:
            return 0
        return conn.execute(f"DELETE FROM {TABLE} WHERE ts < %s", (oldest,)).rowcount

    def prune(self, retention_days: float | None = None, now: datetime | None = None) -> int:
        now = utc(now) if now is not None else datetime.now(UTC)
        days = self.retention_days if retention_days is None else retention_days

        def prune(conn: psycopg.Connection) -> int:
            with conn.transaction():
                deleted = self._delete_before(conn, cutoff(days, now))
                conn.execute(f"INSERT INTO {META} VALUES ('last_prune', to_jsonb(%s::timestamptz)) "
                             f"ON CONFLICT (key) DO UPDATE SET value = excluded.value", (now,))
            return deleted

        return self._run(prune)

    # ---- reads ---------------------------------------------------------------------
    def count(self, since: datetime | None = None, until: datetime | None = None) -> int:
        where, params = time_range(since, until, "%s", utc)

        def count(conn: psycopg.Connection) -> int:
            row = conn.execute(f"SELECT count(*) FROM {TABLE}{where}", params).fetchone()
            assert row is not None
            return int(row[0])

        return self._run(count)

    def query(self, since: datetime | None = None, until: datetime | None = None, limit: int | None = None,
              newest_first: bool = False) -> list[QueryLogEntry]:
        where, params = time_range(since, until, "%s", utc)
        order = "DESC" if newest_first else "ASC"
        sql = f"{_SELECT}{where} ORDER BY ts {order}, id {order}"
        if limit is not None:
            sql += " LIMIT %s"
            params.append(int(limit))
        rows = self._run(lambda conn: conn.execute(sql, params).fetchall())
        return [_entry(r) for r in rows]

    def iter(self, since: datetime | None = None, until: datetime | None = None) -> Iterator[QueryLogEntry]:
        where, params = time_range(since, until, "%s", utc)
        key: tuple[datetime, int] | None = None
        while True:
            after = "" if key is None else (" AND " if where else " WHERE ") + "(ts, id) > (%s, %s)"
            sql = f"{_SELECT}{where}{after} ORDER BY ts, id LIMIT {PAGE}"
            args = params + ([] if key is None else list(key))
            rows = self._run(partial(_fetch, sql, args))
            for row in rows:
                yield _entry(row)
            if len(rows) < PAGE:
                return
            key = (rows[-1][1], rows[-1][0])
