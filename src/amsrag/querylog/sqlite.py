"""The query log of an embedded index: `querylog.sqlite` in the index directory.

A file of its own (not passages.sqlite): logging never contends with the index's writers, and the log
can be copied, pruned or deleted without touching the index. WAL journal and a busy timeout, so the
service's threads and another process (`amsrag ask --log`, `amsrag ops querylog prune`) share it; every
append and prune is one `BEGIN IMMEDIATE` transaction.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from amsrag.querylog.base import PAGE, PRUNE_INTERVAL, cutoff, time_range
from amsrag.querylog.entry import COLUMNS, JSON_COLUMNS, QueryLogEntry, iso, parse_time, utc
from amsrag.sqlite_wal import WalDatabase

FILE = "querylog.sqlite"
SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS query_log (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    ts TEXT NOT NULL,  -- UTC, fixed-width ISO 8601 (sorts as time)
    source TEXT NOT NULL,
    system TEXT NOT NULL,
    query TEXT NOT NULL,
    language TEXT,
    label TEXT,
    alpha REAL,
    route_label TEXT,
    route_alpha REAL,
    strategy TEXT NOT NULL,
    retrievers TEXT NOT NULL,  -- JSON list
    retriever_calls INTEGER NOT NULL,
    escalations INTEGER NOT NULL,
    corrective_action TEXT,
    abstained INTEGER NOT NULL,
    answer TEXT,
    citations TEXT NOT NULL,  -- JSON list of passage ids
    generator TEXT,
    confidence REAL,
    total_ms REAL,
    timings TEXT NOT NULL,  -- JSON
    signals TEXT NOT NULL,  -- JSON
    audit TEXT,  -- JSON, when the citation-support audit ran
    flagged INTEGER NOT NULL,
    version TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS query_log_ts ON query_log (ts);
CREATE INDEX IF NOT EXISTS query_log_flagged ON query_log (ts) WHERE flagged;
CREATE TABLE IF NOT EXISTS query_log_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""

_INSERT = f"INSERT INTO query_log ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * len(COLUMNS))})"
_SELECT = f"SELECT id, {', '.join(COLUMNS)} FROM query_log"


def _param(name: str, value: Any) -> Any:
    if name == "ts":
        return iso(value)
    if name in JSON_COLUMNS:
        return None if value is None else json.dumps(value, ensure_ascii=False, allow_nan=False)
    if isinstance(value, bool):
        return int(value)
    return value


def _entry(row: sqlite3.Row) -> QueryLogEntry:
    values: dict[str, Any] = dict(zip(("id", *COLUMNS), row, strict=True))
    for name in JSON_COLUMNS:
        if values[name] is not None:
            values[name] = json.loads(values[name])
    values["abstained"], values["flagged"] = bool(values["abstained"]), bool(values["flagged"])
    values["ts"] = parse_time(values["ts"])
    return QueryLogEntry(**values)


class SqliteQueryLog(WalDatabase):
    def __init__(self, path: str | Path, retention_days: float = 30.0,
                 clock: Callable[[], datetime] | None = None) -> None:
        """`clock`: the time of appends (the prune schedule), UTC now by default."""
        super().__init__(path, _SCHEMA, "query_log_meta", SCHEMA_VERSION)
        self._clock = clock or (lambda: datetime.now(UTC))
        self.retention_days = retention_days
        self._next_prune_check: datetime | None = None

    def append(self, entry: QueryLogEntry) -> int:
        now = utc(self._clock())

        def insert() -> sqlite3.Cursor:
            if self._next_prune_check is None or now >= self._next_prune_check:
                self._prune_if_due(now)
            return self.conn.execute(_INSERT, [_param(c, getattr(entry, c)) for c in COLUMNS])

        cur = self.transaction(insert)
        assert cur.lastrowid is not None
        return cur.lastrowid

    def _prune_if_due(self, now: datetime) -> None:
        """In the caller's transaction: prune when no process has for an hour."""
        row = self.conn.execute("SELECT value FROM query_log_meta WHERE key = 'last_prune'").fetchone()
        last = parse_time(row[0]) if row else None
        if last is None or now - last >= PRUNE_INTERVAL:
            self._delete_before(cutoff(self.retention_days, now))
            self.conn.execute("INSERT OR REPLACE INTO query_log_meta VALUES ('last_prune', ?)", (iso(now),))
            last = now
        self._next_prune_check = last + PRUNE_INTERVAL

    def _delete_before(self, oldest: datetime | None) -> int:
        if oldest is None:
            return 0
        return self.conn.execute("DELETE FROM query_log WHERE ts < ?", (iso(oldest),)).rowcount

    def prune(self, retention_days: float | None = None, now: datetime | None = None) -> int:
        now = utc(now) if now is not None else datetime.now(UTC)
        days = self.retention_days if retention_days is None else retention_days
        def delete() -> int:
            deleted = self._delete_before(cutoff(days, now))
            self.conn.execute("INSERT OR REPLACE INTO query_log_meta VALUES ('last_prune', ?)", (iso(now),))
            return deleted

        return self.transaction(delete)

    def count(self, since: datetime | None = None, until: datetime | None = None) -> int:
        where, params = time_range(since, until, "?", iso)
        with self.lock:
            return int(self.conn.execute(f"SELECT count(*) FROM query_log{where}", params).fetchone()[0])

    def query(self, since: datetime | None = None, until: datetime | None = None, limit: int | None = None,
              newest_first: bool = False) -> list[QueryLogEntry]:
        where, params = time_range(since, until, "?", iso)
        order = "DESC" if newest_first else "ASC"
        sql = f"{_SELECT}{where} ORDER BY ts {order}, id {order}"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(int(limit))
        with self.lock:
            rows = self.conn.execute(sql, params).fetchall()
        return [_entry(r) for r in rows]

    def iter(self, since: datetime | None = None, until: datetime | None = None) -> Iterator[QueryLogEntry]:
        where, params = time_range(since, until, "?", iso)
        key: tuple[str, int] | None = None
        while True:
            after = "" if key is None else (" AND " if where else " WHERE ") + "(ts, id) > (?, ?)"
            sql = f"{_SELECT}{where}{after} ORDER BY ts, id LIMIT {PAGE}"
            with self.lock:
                rows = self.conn.execute(sql, params + ([] if key is None else list(key))).fetchall()
            for row in rows:
                yield _entry(row)
            if len(rows) < PAGE:
                return
            key = (rows[-1][1], rows[-1][0])
