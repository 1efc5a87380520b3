"""Passages in SQLite: WAL journal, one transaction per ingest or delete."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from amsrag.types import Passage, PassageRow

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS passages (
    row INTEGER PRIMARY KEY AUTOINCREMENT,  -- never reused: derived indexes key by row
    id TEXT NOT NULL UNIQUE,
    doc_id TEXT NOT NULL,
    title TEXT NOT NULL,
    text TEXT NOT NULL,
    metadata TEXT NOT NULL,
    content_hash TEXT NOT NULL UNIQUE
);
CREATE INDEX IF NOT EXISTS passages_doc_id ON passages(doc_id);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""


def _passage(r: sqlite3.Row | tuple) -> Passage:
    return Passage(id=r[1], doc_id=r[2], title=r[3], text=r[4], metadata=json.loads(r[5]))


class PassageTable:
    """The passages table. Reads are safe from several threads; writes go through `transaction()`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._conn = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None, timeout=30.0)
        self._lock = threading.RLock()
        with self._lock:
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.executescript(_SCHEMA)
            if self.meta("schema_version") is None:
                self._conn.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
                self._conn.execute("INSERT INTO meta VALUES ('generation', '0')")

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def meta(self, key: str) -> str | None:
        with self._lock:
            r = self._conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if r is None else r[0]

    @property
    def generation(self) -> int:
        return int(self.meta("generation") or 0)

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """BEGIN IMMEDIATE ... COMMIT, rolled back on any exception; bumps the generation counter."""
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                self._conn.execute("UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'generation'")
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            else:
                self._conn.execute("COMMIT")

    def count(self) -> int:
        with self._lock:
            return int(self._conn.execute("SELECT COUNT(*) FROM passages").fetchone()[0])

    def count_documents(self) -> int:
        with self._lock:
            return int(self._conn.execute("SELECT COUNT(DISTINCT doc_id) FROM passages").fetchone()[0])

    def row_info(self) -> Iterator[tuple[int, str, str]]:
        with self._lock:
            yield from self._conn.execute("SELECT row, id, title FROM passages ORDER BY row").fetchall()

    def iter_rows(self, rows: Sequence[int] | None = None) -> Iterator[PassageRow]:
        """Passage rows in row order; all of them, or the given rows (missing ones skipped)."""
        with self._lock:
            if rows is None:
                cur = self._conn.execute("SELECT row, id, title, text FROM passages ORDER BY row")
                result = cur.fetchall()
            else:
                result = []
                for chunk in _chunks(sorted(set(rows)), 900):
                    q = f"SELECT row, id, title, text FROM passages WHERE row IN ({','.join('?' * len(chunk))})"
                    result.extend(self._conn.execute(q, chunk).fetchall())
                result.sort()
        for r in result:
            yield PassageRow(*r)

    def passages_by_rows(self, rows: Sequence[int]) -> dict[int, Passage]:
        out: dict[int, Passage] = {}
        with self._lock:
            for chunk in _chunks(list(dict.fromkeys(rows)), 900):
                q = (f"SELECT row, id, doc_id, title, text, metadata FROM passages "
                     f"WHERE row IN ({','.join('?' * len(chunk))})")
                for r in self._conn.execute(q, chunk):
                    out[r[0]] = Passage(id=r[1], doc_id=r[2], title=r[3], text=r[4], metadata=json.loads(r[5]))
        return out

    def get(self, pid: str) -> Passage | None:
        with self._lock:
            r = self._conn.execute(
                "SELECT row, id, doc_id, title, text, metadata FROM passages WHERE id = ?", (pid,)
            ).fetchone()
        return None if r is None else _passage(r)

    def existing(self, conn: sqlite3.Connection, ids: Sequence[str], hashes: Sequence[str]
                 ) -> tuple[dict[str, str], dict[str, str]]:
        """({id: content_hash} for ids present, {content_hash: id} for hashes present)."""
        by_id: dict[str, str] = {}
        by_hash: dict[str, str] = {}
        for chunk in _chunks(list(ids), 900):
            q = f"SELECT id, content_hash FROM passages WHERE id IN ({','.join('?' * len(chunk))})"
            by_id.update(dict(conn.execute(q, chunk).fetchall()))
        for chunk in _chunks(list(hashes), 900):
            q = f"SELECT content_hash, id FROM passages WHERE content_hash IN ({','.join('?' * len(chunk))})"
            by_hash.update(dict(conn.execute(q, chunk).fetchall()))
        return by_id, by_hash

    @staticmethod
    def insert(conn: sqlite3.Connection, passages: Iterable[tuple[Passage, str]]) -> list[int]:
        rows = []
        for p, h in passages:
            cur = conn.execute(
                "INSERT INTO passages (id, doc_id, title, text, metadata, content_hash) VALUES (?, ?, ?, ?, ?, ?)",
                (p.id, p.doc_id or p.id, p.title, p.text, json.dumps(p.metadata, ensure_ascii=False), h),
            )
            row = cur.lastrowid
            assert row is not None  # set by every INSERT into a rowid table
            rows.append(int(row))
        return rows

    @staticmethod
    def rows_for_ids(conn: sqlite3.Connection, ids: Sequence[str]) -> dict[str, int]:
        out: dict[str, int] = {}
        for chunk in _chunks(list(ids), 900):
            q = f"SELECT id, row FROM passages WHERE id IN ({','.join('?' * len(chunk))})"
            out.update(dict(conn.execute(q, chunk).fetchall()))
        return out

    @staticmethod
    def delete_rows(conn: sqlite3.Connection, rows: Sequence[int]) -> None:
        for chunk in _chunks(list(rows), 900):
            conn.execute(f"DELETE FROM passages WHERE row IN ({','.join('?' * len(chunk))})", chunk)


def _chunks(items: list, size: int) -> Iterator[list]:
    for i in range(0, len(items), size):
        yield items[i : i + size]
