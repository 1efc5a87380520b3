"""Keeping a PostgreSQL index's derived data in step inside a write transaction: passage rows, BM25 postings
and statistics, the HNSW index, the entity graph (shared by writing and repair)."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

import numpy as np
import psycopg
import scipy.sparse as sp
from psycopg.types.json import Jsonb

from amsrag.embed.encoder import DIMENSION, passage_text_for_embedding
from amsrag.indexes.bm25 import passage_text_for_bm25
from amsrag.indexes.entity_graph import EntityGraph, NerCache, text_checksum
from amsrag.progress import Progress
from amsrag.store.postgres import graph_state, schema
from amsrag.store.postgres.bm25_blobs import BM25State
from amsrag.store.postgres.connection import connect
from amsrag.store.postgres.core import HNSW_INDEX, LOOKUP_CHUNK, PgCore, _scalar
from amsrag.store.writes import stored_metadata
from amsrag.types import Passage, PassageRow


@dataclass
class _Change:
    """What `_apply` did."""

    added: list[PassageRow]
    removed: int
    embedded: int  # inserted passages embedded now (the others had a given, staged or stored vector)
    bulk: bool  # the HNSW index was rebuilt after loading (vacuum after the commit)
    bm25: BM25State | None = field(default=None)  # the BM25 index as the write left it (cached once committed)


class PgDerived(PgCore):
    """The steps of a change that writing and repair share."""

    def _vectors_for(self, conn: psycopg.Connection, chosen: Sequence[tuple[Passage, str]],
                     progress: Progress) -> tuple[np.ndarray, int]:
        """The vectors of `chosen`: staged, or stored with a passage of the same content (one being
        replaced), else embedded now; and how many were embedded."""
        hashes = [h for _, h in chosen]
        if not hashes:
            return np.zeros((0, DIMENSION), np.float32), 0
        known: dict[str, np.ndarray] = {}
        for start in range(0, len(hashes), LOOKUP_CHUNK):
            part = hashes[start : start + LOOKUP_CHUNK]
            for h, v in conn.execute("SELECT content_hash, vector FROM staged_vectors WHERE content_hash = ANY(%s) "
                                     "UNION ALL SELECT content_hash, embedding FROM passages "
                                     "WHERE content_hash = ANY(%s)", (part, part)).fetchall():
                known[h] = np.asarray(v, dtype=np.float32)
        todo = [i for i, h in enumerate(hashes) if h not in known]
        with progress.task("dense: embed", len(todo)) as adv:
            if todo:
                fresh = self.encoder.encode([passage_text_for_embedding(chosen[i][0].title, chosen[i][0].text)
                                             for i in todo], adv)
                known.update({hashes[i]: np.asarray(fresh[j], dtype=np.float32) for j, i in enumerate(todo)})
        return np.stack([known[h] for h in hashes]), len(todo)

    def _tokenise(self, chosen: Sequence[tuple[Passage, str]], progress: Progress) -> list[list[str]]:
        if not chosen:
            return []
        with progress.task("bm25: tokenise", len(chosen)) as adv:
            tokens = []
            for n, (p, _) in enumerate(chosen):
                tokens.append(self.tokenizer(passage_text_for_bm25(p.title, p.text)))
                if n % 500 == 499:
                    adv(500)
            adv(len(chosen) % 500)
        return tokens

    @staticmethod
    def _delete_rows(conn: psycopg.Connection, removed: Sequence[int]) -> int:
        """Delete passage rows (postings and NER cascade; terms only they use go, the others' df drop
        by their share); the BM25 tokens they held."""
        if not removed:
            return 0
        rows = [int(r) for r in removed]
        conn.execute("DELETE FROM bm25_terms t USING (SELECT tid, count(*) AS n FROM bm25_postings "
                     "WHERE prow = ANY(%s) GROUP BY tid) c WHERE t.tid = c.tid AND t.df = c.n", (rows,))
        conn.execute("UPDATE bm25_terms t SET df = t.df - c.n FROM (SELECT tid, count(*) AS n FROM bm25_postings "
                     "WHERE prow = ANY(%s) GROUP BY tid) c WHERE t.tid = c.tid AND t.df > c.n", (rows,))
        lost = _scalar(conn.execute("SELECT coalesce(sum(doc_len), 0) FROM passages WHERE prow = ANY(%s)", (rows,)))
        conn.execute("DELETE FROM passages WHERE prow = ANY(%s)", (rows,))
        return int(lost)

    @staticmethod
    def _insert_rows(conn: psycopg.Connection, chosen: Sequence[tuple[Passage, str]], tokens: list[list[str]],
                     vecs: np.ndarray) -> list[PassageRow]:
        """Insert the passages with their vectors (staged vectors of their content are dropped: stored now)."""
        if not chosen:
            return []
        with conn.cursor().copy("COPY passages (id, doc_id, title, text, metadata, content_hash, doc_len, "
                                "embedding) FROM STDIN WITH (FORMAT BINARY)") as copy:
            copy.set_types(["text", "text", "text", "text", "jsonb", "text", "int4", "vector"])
            for (p, h), toks, v in zip(chosen, tokens, vecs, strict=True):
                copy.write_row([p.id, p.doc_id or p.id, p.title, p.text, Jsonb(stored_metadata(p)), h, len(toks), v])
        row_of: dict[str, int] = dict(conn.execute("SELECT id, prow FROM passages WHERE id = ANY(%s)",
                                   ([p.id for p, _ in chosen],)).fetchall())
        # rows locked in content-hash order, as `stage_vectors` writes them: no deadlock between the two
        conn.execute("DELETE FROM staged_vectors WHERE content_hash IN (SELECT content_hash FROM staged_vectors "
                     "WHERE content_hash = ANY(%s) ORDER BY content_hash FOR UPDATE)", ([h for _, h in chosen],))
        return [PassageRow(int(row_of[p.id]), p.id, p.title, p.text) for p, _ in chosen]

    def _create_hnsw(self, conn: psycopg.Connection) -> None:
        d = self.config.dense
        conn.execute("SET LOCAL maintenance_work_mem = '1GB'")
        conn.execute(f"CREATE INDEX {HNSW_INDEX} ON passages USING hnsw (embedding vector_cosine_ops) "
                     f"WITH (m = {int(d.hnsw_m)}, ef_construction = {int(d.hnsw_ef_construction)})")

    def _vacuum(self) -> None:
        """After a bulk load: visibility map and planner statistics, so postings are read by index-only
        scans and plans fit the data (autovacuum would get there too, later)."""
        with connect(self.dsn) as conn:
            conn.execute("SET statement_timeout = 0")
            for table in ("passages", "bm25_terms", "bm25_postings", "graph_ner", "entities", "mentions",
                          "entity_surfaces"):
                conn.execute(f"VACUUM (ANALYZE) {schema.SCHEMA}.{table}")

    def _bump(self, conn: psycopg.Connection, passages: int, tokens: int) -> None:
        conn.execute("UPDATE meta SET value = to_jsonb((value::text)::bigint + %s) WHERE key = 'n_passages'",
                     (passages,))
        conn.execute("UPDATE meta SET value = to_jsonb((value::text)::bigint + 1) WHERE key = 'generation'")
        conn.execute("UPDATE meta SET value = jsonb_build_object('n_docs', (value->>'n_docs')::bigint + %s, "
                     "'total_len', (value->>'total_len')::bigint + %s) WHERE key = 'bm25_stats'", (passages, tokens))
        conn.execute("UPDATE meta SET value = to_jsonb(%s::text) WHERE key = 'updated'",
                     (datetime.now(UTC).isoformat(timespec="seconds"),))

    def _add_postings(self, conn: psycopg.Connection, docs: list[tuple[int, list[str]]]) -> None:
        """Insert the postings of `docs` (their terms' document frequencies go up), each with its impact:
        the tf part at the index's reference average length (set by the first postings written)."""
        df: Counter[str] = Counter()
        per_doc = []
        for row, toks in docs:
            counts = Counter(toks)
            df.update(counts.keys())
            per_doc.append((row, len(toks), counts))
        if not df:
            return
        terms = sorted(df)
        conn.execute("INSERT INTO bm25_terms (term, df) SELECT * FROM unnest(%s::text[], %s::int[]) "
                     "ON CONFLICT (term) DO UPDATE SET df = bm25_terms.df + EXCLUDED.df",
                     (terms, [df[t] for t in terms]))
        tid: dict[str, int] = dict(conn.execute("SELECT term, tid FROM bm25_terms WHERE term = ANY(%s)",
                                                (terms,)).fetchall())
        impact = self.meta(conn, "bm25_impact") or {}
        k1, b = float(impact.get("k1", self.config.bm25.k1)), float(impact.get("b", self.config.bm25.b))
        ref = impact.get("ref")
        if ref is None:  # the first postings: their average length is the reference from now on
            ref = max(1.0, sum(dl for _, dl, _ in per_doc) / len(per_doc))
            conn.execute("INSERT INTO meta (key, value) VALUES ('bm25_impact', %s) ON CONFLICT (key) "
                         "DO UPDATE SET value = EXCLUDED.value", (Jsonb({"ref": ref, "k1": k1, "b": b}),))
        norm = k1 * (1 - b)
        scale = k1 * b / float(ref)
        with conn.cursor().copy("COPY bm25_postings (tid, prow, tf, dl, imp) FROM STDIN WITH (FORMAT BINARY)") as copy:
            copy.set_types(["int4", "int8", "int4", "int4", "float4"])
            for row, dl, counts in per_doc:
                for term, tf in counts.items():
                    copy.write_row((tid[term], row, tf, dl, tf / (tf + norm + scale * dl)))

    def _rewrite_graph(self, conn: psycopg.Connection, added: list[PassageRow], removed: list[int],
                       known: dict[int, tuple[str, ...]], progress: Progress) -> None:
        """Recompute the entity graph of the new passage set (as the embedded store does: mention
        matching runs over all passages, NER only on passages without a stored result) and replace
        the entity tables with it."""
        stored: NerCache = {int(r): (int(c), tuple(s)) for r, c, s in
                            conn.execute("SELECT prow, crc, surfaces FROM graph_ner").fetchall()}
        cache = dict(stored)
        for r in removed:
            cache.pop(int(r), None)
        by_row = {p.row: p for p in added}
        for row, surfaces in known.items():
            cache[row] = (text_checksum(by_row[row].text), tuple(surfaces))
        base = EntityGraph(self.config.graph, [], [], sp.csr_array((0, 0), dtype=np.int8), [],
                           np.zeros(0, np.int64), cache)
        all_rows = lambda: [PassageRow(int(r), i, t, x) for r, i, t, x in  # noqa: E731
                            conn.execute("SELECT prow, id, title, text FROM passages ORDER BY prow").fetchall()]
        with progress.task("graph: entities", len([p for p in added if p.row not in known])) as adv:
            graph = base.update([p for p in added if p.row not in known], [], all_rows, adv)
        ner_new = {r: v for r, v in graph.ner.items() if stored.get(r) != v}
        gone = [r for r in stored if r not in graph.ner]
        if gone:
            conn.execute("DELETE FROM graph_ner WHERE prow = ANY(%s)", (gone,))
        if ner_new:
            conn.execute("DELETE FROM graph_ner WHERE prow = ANY(%s)", (list(ner_new),))
            with conn.cursor().copy("COPY graph_ner (prow, crc, surfaces) FROM STDIN WITH (FORMAT BINARY)") as copy:
                copy.set_types(["int8", "int8", "text[]"])
                for r, (crc, surfaces) in ner_new.items():
                    copy.write_row((r, crc, list(surfaces)))
        m = graph.matrix.tocoo()
        degree = np.bincount(m.col, minlength=graph.n_entities) if graph.n_entities else np.zeros(0, np.int64)
        conn.execute("DELETE FROM mentions")
        conn.execute("DELETE FROM entities")
        conn.execute("DELETE FROM entity_surfaces")
        with conn.cursor().copy("COPY entities (eid, key, degree) FROM STDIN WITH (FORMAT BINARY)") as copy:
            copy.set_types(["int4", "text", "int4"])
            for e, key in enumerate(graph.entity_keys):
                copy.write_row((e, key, int(degree[e])))
        with conn.cursor().copy("COPY mentions (prow, eid, kind) FROM STDIN WITH (FORMAT BINARY)") as copy:
            copy.set_types(["int8", "int4", "int2"])
            for r, e, k in zip(m.row.tolist(), m.col.tolist(), m.data.tolist(), strict=True):
                copy.write_row((r, e, k))
        with conn.cursor().copy("COPY entity_surfaces (surface, eid) FROM STDIN WITH (FORMAT BINARY)") as copy:
            copy.set_types(["text", "int4"])
            for s, e in zip(graph.query_surfaces, graph.query_surface_entities.tolist(), strict=True):
                copy.write_row((s, e))
        conn.execute("UPDATE meta SET value = to_jsonb(%s::int) WHERE key = 'graph_max_surface'",
                     (max((len(s) for s in graph.query_surfaces), default=0),))
        graph_state.bump_generation(conn)

    def _written(self, change: _Change, seconds: dict[str, float]) -> None:
        """After a write committed: planner statistics after a bulk load; retrievers read afresh."""
        if change.bulk:
            t = time.perf_counter()
            self._vacuum()
            seconds["vacuum"] = time.perf_counter() - t
        if change.bm25 is not None:
            self._bm25 = change.bm25
        self.built = {}
