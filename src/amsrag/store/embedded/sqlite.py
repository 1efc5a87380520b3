"""Passages in SQLite: WAL journal, one transaction per ingest or delete.

Beside the passages: `documents` (the source fingerprint of each document last written in full, so a
sync can tell changed files from unchanged ones, and the document's title, modification time, size and
tags, which `tag` / `modified` filters join on; an index made before these columns gets them on open)
and `embeddings` (every passage vector by content hash: the durable copy the dense index is rebuilt
from, and the staging area of an ingest, which commits vectors batch by batch before the passages so a
killed ingest resumes without re-embedding).
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from amsrag.errors import StorageError
from amsrag.sqlite_wal import use_wal
from amsrag.store.documents import DocumentMeta
from amsrag.store.writes import stored_metadata
from amsrag.types import Passage, PassageRow

SCHEMA_VERSION = 2

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
CREATE TABLE IF NOT EXISTS documents (
    doc_id TEXT PRIMARY KEY,
    content_hash TEXT NOT NULL,
    source TEXT NOT NULL,
    updated TEXT NOT NULL,
    title TEXT,
    modified TEXT,  -- UTC YYYY-MM-DDTHH:MM:SSZ
    size INTEGER,
    tags TEXT NOT NULL DEFAULT '[]'  -- a JSON array, sorted
);
CREATE TABLE IF NOT EXISTS embeddings (content_hash TEXT PRIMARY KEY, vector BLOB NOT NULL);
"""

# The document columns added after schema 2 (indexes made before them gain them on open).
DOCUMENT_META_COLUMNS = (("title", "TEXT"), ("modified", "TEXT"), ("size", "INTEGER"),
                         ("tags", "TEXT NOT NULL DEFAULT '[]'"))

log = logging.getLogger("amsrag.store")


def _passage(r: sqlite3.Row | tuple) -> Passage:
    return Passage(id=r[1], doc_id=r[2], title=r[3], text=r[4], metadata=json.loads(r[5]))


class PassageTable:
    """The passages table. Reads are safe from several threads; writes go through `transaction()`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._conn = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None, timeout=30.0)
        self._lock = threading.RLock()
        self._document_meta = True  # the documents table has the metadata columns
        try:
            use_wal(self._conn)
        except sqlite3.OperationalError as exc:
            wal = Path(f"{path}-wal")
            if not path.exists():
                raise
            if wal.exists() and wal.stat().st_size > 0:
                raise StorageError(f"{path}: cannot be opened ({exc}): the disk may be full, and writes not yet "
                                   f"merged into the file wait in {wal.name}; free some space and retry") from exc
            # WAL needs its shared-memory file: on a full disk it cannot be made, and reads need not write.
            # The file read as it is on disk (a clean close left no WAL to merge); writes are refused.
            self._conn.close()
            log.warning("%s: opened read-only (%s: the disk may be full); writes will fail", path, exc)
            self._conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro&immutable=1", uri=True,
                                         check_same_thread=False, isolation_level=None)
            self._document_meta = not self._missing_document_columns()
            return
        with self._lock:
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.executescript(_SCHEMA)
            if self.meta("schema_version") is None:
                self._conn.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
                self._conn.execute("INSERT INTO meta VALUES ('generation', '0')")
            if self._missing_document_columns():
                self._add_document_columns()

    def _missing_document_columns(self) -> list[tuple[str, str]]:
        have = {r[1] for r in self._conn.execute("PRAGMA table_info(documents)").fetchall()}
        return [c for c in DOCUMENT_META_COLUMNS if c[0] not in have]

    def _add_document_columns(self) -> None:
        """The documents table of an older index gains the metadata columns (empty until the next add or
        sync of its files); another process may be doing the same, so it is checked again under the lock."""
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            for name, decl in self._missing_document_columns():
                self._conn.execute(f"ALTER TABLE documents ADD COLUMN {name} {decl}")
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")

    @property
    def schema_version(self) -> int:
        return int(self.meta("schema_version") or 0)

    def mark_migrated(self, conn: sqlite3.Connection) -> None:
        conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION),))

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

    def generations(self) -> tuple[int, int]:
        """(the passages' generation, the documents' metadata generation): what a resolved filter depends on."""
        with self._lock:
            found = dict(self._conn.execute(
                "SELECT key, value FROM meta WHERE key IN ('generation', 'documents_generation')").fetchall())
        return int(found.get("generation") or 0), int(found.get("documents_generation") or 0)

    @contextmanager
    def transaction(self, bump: bool = True) -> Iterator[sqlite3.Connection]:
        """BEGIN IMMEDIATE ... COMMIT, rolled back on any exception; bumps the generation counter
        (unless `bump` is False: a write derived indexes do not depend on, such as staged vectors)."""
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                if bump:
                    self._conn.execute(
                        "UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'generation'")
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

    def row_facets(self) -> list[tuple[int, str, Any, Any, str | None, str | None]]:
        """(row, document key, metadata `source`, metadata `type`, the document's modification time and tags
        (a JSON array), None without a document row) of every passage: what filters read."""
        document = "d.modified, d.tags" if self._document_meta else "NULL, NULL"
        with self._lock:
            return self._conn.execute(
                f"SELECT p.row, p.doc_id, json_extract(p.metadata, '$.source'), json_extract(p.metadata, '$.type'), "
                f"{document} FROM passages p LEFT JOIN documents d ON d.doc_id = p.doc_id").fetchall()

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
                (p.id, p.doc_id or p.id, p.title, p.text, json.dumps(stored_metadata(p), ensure_ascii=False), h),
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


    # ---- documents
    def documents(self, prefix: str | None = None) -> list[tuple[Any, ...]]:
        """(doc_id, passages, content hash or "", source, title, modified, size, tags as a JSON array) of every
        document (doc_id or source starting with `prefix` when given), by doc_id."""
        where: str = ""
        args: tuple[object, ...] = ()
        if prefix:
            where = "WHERE substr(p.doc_id, 1, ?) = ? OR substr(d.source, 1, ?) = ?"
            args = (len(prefix), prefix, len(prefix), prefix)
        meta = "d.title, d.modified, d.size, d.tags" if self._document_meta else "NULL, NULL, NULL, NULL"
        q = (f"SELECT p.doc_id, COUNT(*), COALESCE(d.content_hash, ''), COALESCE(d.source, ''), {meta} "
             f"FROM passages p LEFT JOIN documents d ON d.doc_id = p.doc_id {where} GROUP BY p.doc_id "
             f"ORDER BY p.doc_id")
        with self._lock:
            return [(r[0], int(r[1]), *r[2:]) for r in self._conn.execute(q, args).fetchall()]

    @staticmethod
    def document_rows(conn: sqlite3.Connection, doc_ids: Sequence[str]) -> list[tuple[int, str, str, str]]:
        out: list[tuple[int, str, str, str]] = []
        for chunk in _chunks(list(doc_ids), 900):
            q = (f"SELECT row, id, doc_id, content_hash FROM passages "
                 f"WHERE doc_id IN ({','.join('?' * len(chunk))}) ORDER BY row")
            out.extend(conn.execute(q, chunk).fetchall())
        return out

    @staticmethod
    def record_documents(conn: sqlite3.Connection, docs: Iterable[tuple[str, str, str]], when: str) -> None:
        """Record (doc_id, content hash, source) of documents written in full."""
        conn.executemany(
            "INSERT INTO documents (doc_id, content_hash, source, updated) VALUES (?, ?, ?, ?) "
            "ON CONFLICT(doc_id) DO UPDATE SET content_hash = excluded.content_hash, source = excluded.source, "
            "updated = excluded.updated", [(d, h, s, when) for d, h, s in docs])

    @staticmethod
    def forget_documents(conn: sqlite3.Connection, doc_ids: Iterable[str]) -> None:
        """Drop the recorded fingerprint of documents changed passage by passage (their title, time and tags
        stay); a document without passages left (call this after deleting them) loses its row."""
        ids = [(d,) for d in doc_ids]
        conn.executemany("DELETE FROM documents WHERE doc_id = ?1 AND NOT EXISTS "
                         "(SELECT 1 FROM passages WHERE doc_id = ?1)", ids)
        conn.executemany("UPDATE documents SET content_hash = '' WHERE doc_id = ?", ids)

    @staticmethod
    def put_document_meta(conn: sqlite3.Connection, metas: Mapping[str, DocumentMeta], when: str) -> int:
        """Write the metadata of the stored documents among `metas` (a row made for one that has none) and
        count the documents' metadata generation up; how many documents were written."""
        written = 0
        for doc_id, m in metas.items():
            cur = conn.execute(
                "INSERT INTO documents (doc_id, content_hash, source, updated, title, modified, size, tags) "
                "SELECT ?1, '', '', ?2, ?3, ?4, ?5, ?6 WHERE EXISTS (SELECT 1 FROM passages WHERE doc_id = ?1) "
                "ON CONFLICT(doc_id) DO UPDATE SET title = excluded.title, modified = excluded.modified, "
                "size = excluded.size, tags = excluded.tags",
                (doc_id, when, m.title, m.modified, m.size, json.dumps(list(m.tags), ensure_ascii=False)))
            written += cur.rowcount
        conn.execute("INSERT INTO meta (key, value) VALUES ('documents_generation', '1') ON CONFLICT(key) "
                     "DO UPDATE SET value = CAST(value AS INTEGER) + 1")
        return written

    @staticmethod
    def doc_ids_of_rows(conn: sqlite3.Connection, rows: Sequence[int]) -> set[str]:
        out: set[str] = set()
        for chunk in _chunks(list(rows), 900):
            q = f"SELECT DISTINCT doc_id FROM passages WHERE row IN ({','.join('?' * len(chunk))})"
            out.update(r[0] for r in conn.execute(q, chunk))
        return out

    @staticmethod
    def hashes_of_rows(conn: sqlite3.Connection, rows: Sequence[int]) -> dict[int, str]:
        out: dict[int, str] = {}
        for chunk in _chunks(list(rows), 900):
            q = f"SELECT row, content_hash FROM passages WHERE row IN ({','.join('?' * len(chunk))})"
            out.update(dict(conn.execute(q, chunk).fetchall()))
        return out

    # ---- embeddings (durable vectors and the staging area of an ingest)
    def vectors_by_hash(self, hashes: Sequence[str], dim: int) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        with self._lock:
            for chunk in _chunks(list(dict.fromkeys(hashes)), 900):
                q = f"SELECT content_hash, vector FROM embeddings WHERE content_hash IN ({','.join('?' * len(chunk))})"
                for h, blob in self._conn.execute(q, chunk):
                    v = np.frombuffer(blob, dtype=np.float32)
                    if v.shape == (dim,):
                        out[h] = v
        return out

    def count_staged(self, hashes: Sequence[str]) -> int:
        """How many of `hashes` have a vector but no stored passage."""
        n = 0
        with self._lock:
            for chunk in _chunks(list(dict.fromkeys(hashes)), 900):
                q = (f"SELECT COUNT(*) FROM embeddings e WHERE e.content_hash IN ({','.join('?' * len(chunk))}) "
                     f"AND NOT EXISTS (SELECT 1 FROM passages p WHERE p.content_hash = e.content_hash)")
                n += int(self._conn.execute(q, chunk).fetchone()[0])
        return n

    @staticmethod
    def put_vectors(conn: sqlite3.Connection, hashes: Sequence[str], vectors: np.ndarray) -> None:
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        conn.executemany("INSERT OR REPLACE INTO embeddings (content_hash, vector) VALUES (?, ?)",
                         [(h, vectors[i].tobytes()) for i, h in enumerate(hashes)])

    @staticmethod
    def drop_vectors(conn: sqlite3.Connection, hashes: Iterable[str]) -> None:
        """Delete the vectors of these hashes unless a stored passage still has that content."""
        conn.executemany("DELETE FROM embeddings WHERE content_hash = ? AND NOT EXISTS "
                         "(SELECT 1 FROM passages WHERE content_hash = ?)", [(h, h) for h in hashes])

    def embedding_counts(self) -> tuple[int, int]:
        """(passages with a stored vector, vectors staged for passages not stored)."""
        with self._lock:
            stored = self._conn.execute(
                "SELECT COUNT(*) FROM passages p JOIN embeddings e ON e.content_hash = p.content_hash").fetchone()[0]
            total = self._conn.execute("SELECT COUNT(*) FROM embeddings").fetchone()[0]
        return int(stored), int(total) - int(stored)

    def integrity(self) -> list[str]:
        """SQLite's own integrity check: [] when the database is sound."""
        with self._lock:
            rows = [r[0] for r in self._conn.execute("PRAGMA integrity_check").fetchall()]
        return [] if rows == ["ok"] else rows

    def row_hashes(self) -> Iterator[tuple[int, str]]:
        with self._lock:
            yield from self._conn.execute("SELECT row, content_hash FROM passages ORDER BY row").fetchall()


def _chunks(items: list, size: int) -> Iterator[list]:
    for i in range(0, len(items), size):
        yield items[i : i + size]
