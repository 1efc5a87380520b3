"""Reading a PostgreSQL index: passages, rows and vectors by id, every passage in row order, statistics."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import psycopg

from amsrag.embed.encoder import DIMENSION
from amsrag.store.postgres import schema
from amsrag.store.postgres.core import PgCore, _scalar
from amsrag.types import Passage


class PgReads(PgCore):
    """The read side (`PassageIndex`, `PassageScan`) and `stats`."""

    def __len__(self) -> int:
        return int(self.read(lambda c: self.meta(c, "n_passages")))

    def describe_rows(self, rows: Sequence[int]) -> list[tuple[str, str]]:
        rows = [int(r) for r in rows]
        if not rows:
            return []
        found = {r: name for r in rows if (name := self.row_names.get(r)) is not None}
        missing = sorted(set(rows) - found.keys())
        if missing:
            fetched = {int(r): (str(i), str(t)) for r, i, t in self.read(lambda c: c.execute(
                "SELECT prow, id, title FROM passages WHERE prow = ANY(%s)", (missing,)).fetchall())}
            self.row_names.update(fetched)
            found.update(fetched)
        return [found[r] for r in rows]

    def rows_for_ids(self, ids: Sequence[str]) -> dict[str, int]:
        got: dict[str, int] = dict(self.read(lambda c: c.execute("SELECT id, prow FROM passages WHERE id = ANY(%s)",
                                                                 (list(ids),)).fetchall()))
        return {pid: int(got[pid]) for pid in ids if pid in got}

    def passages_by_rows(self, rows: Sequence[int]) -> list[Passage]:
        rows = [int(r) for r in rows]
        if not rows:
            return []
        got = {r[0]: Passage(id=r[1], doc_id=r[2], title=r[3], text=r[4], metadata=r[5]) for r in self.read(
            lambda c: c.execute("SELECT prow, id, doc_id, title, text, metadata FROM passages WHERE prow = ANY(%s)",
                                (rows,)).fetchall())}
        return [got[r] for r in rows]

    def get(self, pid: str) -> Passage | None:
        r = self.read(lambda c: c.execute("SELECT id, doc_id, title, text, metadata FROM passages WHERE id = %s",
                                          (pid,)).fetchone())
        return None if r is None else Passage(id=r[0], doc_id=r[1], title=r[2], text=r[3], metadata=r[4])

    def iter_passages(self, batch: int = 1000) -> Iterator[Passage]:
        last = 0
        while True:
            def page(c: psycopg.Connection, last: int = last) -> list[tuple[Any, ...]]:
                return c.execute("SELECT prow, id, doc_id, title, text, metadata FROM passages WHERE prow > %s "
                                 "ORDER BY prow LIMIT %s", (last, batch)).fetchall()

            got = self.read(page)
            if not got:
                return
            for r in got:
                yield Passage(id=r[1], doc_id=r[2], title=r[3], text=r[4], metadata=r[5])
            last = got[-1][0]

    def vectors_for_rows(self, rows: Sequence[int]) -> np.ndarray:
        rows = [int(r) for r in rows]
        if not rows:
            return np.zeros((0, DIMENSION), np.float32)
        got: dict[int, Any] = dict(self.read(lambda c: c.execute(
            "SELECT prow, embedding FROM passages WHERE prow = ANY(%s)", (rows,)).fetchall()))
        return np.stack([np.asarray(got[r], dtype=np.float32) for r in rows])

    def stored_rows(self) -> list[int]:
        return [int(r) for (r,) in self.read(lambda c: c.execute("SELECT prow FROM passages ORDER BY prow").fetchall())]

    def stats(self) -> dict[str, Any]:
        def q(c: psycopg.Connection) -> dict[str, Any]:
            meta: dict[str, Any] = dict(c.execute("SELECT key, value FROM meta").fetchall())
            docs = _scalar(c.execute("SELECT count(DISTINCT doc_id) FROM passages"))
            vocab = _scalar(c.execute("SELECT count(*) FROM bm25_terms"))
            ents = _scalar(c.execute("SELECT count(*) FROM entities"))
            edges = _scalar(c.execute("SELECT count(*) FROM mentions"))
            size = _scalar(c.execute("SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                                     "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s "
                                     "AND c.relkind = 'r'",
                                     (schema.SCHEMA,)))
            version = schema.installed_version(c)
            library = _scalar(c.execute("SELECT count(*) FROM query_library"))
            staged = _scalar(c.execute("SELECT count(*) FROM staged_vectors s WHERE NOT EXISTS "
                                       "(SELECT 1 FROM passages p WHERE p.content_hash = s.content_hash)"))
            return {"index": self.path, "backend": self.backend, "passages": int(meta["n_passages"]),
                    "documents": int(docs), "generation": int(meta["generation"]),
                    "embedding_model": meta["params"]["dense"]["model_id"], "dense_search": "hnsw (pgvector)",
                    "bm25": {"method": self.config.bm25.method, "vocabulary": int(vocab),
                             "tokens": int(meta["bm25_stats"]["total_len"])},
                    "graph": {"entities": int(ents), "edges": int(edges)}, "query_library": int(library),
                    "staged_vectors": int(staged),
                    "disk_bytes": int(size),
                    "schema_version": version, "created": meta["created"], "updated": meta["updated"]}
        return self.read(q)
