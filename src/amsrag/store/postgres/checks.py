"""The health of a PostgreSQL index (`IndexHealth`): `check` verifies the stored data and every derived index,
`repair` rebuilds damaged (or named) ones from the stored passages and vectors."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
import psycopg
from psycopg.types.json import Jsonb

from amsrag.embed.encoder import passage_text_for_embedding
from amsrag.errors import AmsragError, InputError
from amsrag.indexes.bm25 import passage_text_for_bm25
from amsrag.indexes.entities import SPACELESS_CLASS
from amsrag.indexes.entities_zh import is_mostly_han
from amsrag.progress import NullProgress, Progress
from amsrag.store.health import CheckReport, RepairReport
from amsrag.store.postgres import bm25_blobs, schema
from amsrag.store.postgres.bm25_blobs import BM25State
from amsrag.store.postgres.connection import connect
from amsrag.store.postgres.core import CHECK_SAMPLE, COMPONENTS, HNSW_INDEX, NORM_TOLERANCE, REPAIR_PAGE, _scalar
from amsrag.store.postgres.derived import PgDerived, _Change
from amsrag.store.writes import expected_params, zh_graph_problem


class PgChecks(PgDerived):
    """`check` and `repair`."""

    def check(self, progress: Progress | None = None) -> CheckReport:
        """Verify the tables against each other, in one read-only snapshot: the passage count and BM25
        statistics in meta, every passage's postings and every term's document frequency (and the
        postings of a sample of passages against their text tokenised again), every stored vector
        finite and unit-norm, the HNSW index present and valid, the entity graph covering every
        passage. PostgreSQL keeps no derived files; `repair` rebuilds the components in `repairable`."""
        report = CheckReport(self.location)
        conn = connect(self.dsn)
        try:
            with conn.transaction():
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                conn.execute(f"SET LOCAL search_path = {schema.SEARCH_PATH}")
                self._check(conn, report, progress or NullProgress())
        finally:
            conn.close()
        return report

    def _check(self, conn: psycopg.Connection, report: CheckReport, progress: Progress) -> None:
        report.checked.append(f"schema version {schema.installed_version(conn)}")
        n, total = conn.execute("SELECT count(*), coalesce(sum(doc_len), 0) FROM passages").fetchone() or (0, 0)
        n, total = int(n), int(total)
        with progress.task("check: tables", len(COMPONENTS)) as adv:
            self._check_bm25(conn, report, n, total)
            adv(1)
            self._check_dense(conn, report)
            adv(1)
            self._check_graph(conn, report)
            zh = self._zh_graph_problem(conn)
            if zh is not None:
                report.problem(zh, "graph")
            adv(1)
        staged = _scalar(conn.execute("SELECT count(*) FROM staged_vectors s WHERE NOT EXISTS "
                                      "(SELECT 1 FROM passages p WHERE p.content_hash = s.content_hash)"))
        report.checked.append(f"{n} passages, {staged} staged vector(s)")

    def _check_bm25(self, conn: psycopg.Connection, report: CheckReport, n: int, total: int) -> None:
        report.checked.append("bm25")
        meta: dict[str, Any] = dict(conn.execute(
            "SELECT key, value FROM meta WHERE key IN ('n_passages', 'bm25_stats')").fetchall())
        if meta.get("n_passages") != n:
            report.problem(f"meta: n_passages is {meta.get('n_passages')}, the passages table holds {n}", "bm25")
        stats = meta.get("bm25_stats") or {}
        if (stats.get("n_docs"), stats.get("total_len")) != (n, total):
            report.problem(f"bm25: the collection statistics count {stats.get('n_docs')} passages of "
                           f"{stats.get('total_len')} tokens; the passages hold {n} of {total}", "bm25")
        unposted = _scalar(conn.execute("SELECT count(*) FROM passages p WHERE p.doc_len > 0 AND NOT EXISTS "
                                        "(SELECT 1 FROM bm25_postings po WHERE po.prow = p.prow)"))
        if unposted:
            report.problem(f"bm25: {unposted} passage(s) have no postings", "bm25")
        bad_len = _scalar(conn.execute(
            "SELECT count(*) FROM passages p JOIN (SELECT prow, sum(tf) AS s, min(dl) AS lo, max(dl) AS hi "
            "FROM bm25_postings GROUP BY prow) c ON c.prow = p.prow "
            "WHERE c.s <> p.doc_len OR c.lo <> p.doc_len OR c.hi <> p.doc_len"))
        if bad_len:
            report.problem(f"bm25: the postings of {bad_len} passage(s) do not add up to their length", "bm25")
        bad_df = _scalar(conn.execute(
            "SELECT count(*) FROM bm25_terms t FULL JOIN (SELECT tid, count(*) AS n FROM bm25_postings "
            "GROUP BY tid) c ON c.tid = t.tid WHERE t.df IS DISTINCT FROM c.n"))
        if bad_df:
            report.problem(f"bm25: {bad_df} term(s) have a document frequency other than their number of "
                           f"postings", "bm25")
        share = min(100.0, 200.0 * CHECK_SAMPLE / max(n, 1))
        sample = conn.execute(f"SELECT prow, title, text, doc_len FROM passages TABLESAMPLE BERNOULLI ({share:.6f}) "
                              f"LIMIT {CHECK_SAMPLE}").fetchall()
        stored: dict[int, Counter[str]] = {int(r[0]): Counter() for r in sample}
        for row, term, tf in conn.execute("SELECT po.prow, t.term, po.tf FROM bm25_postings po JOIN bm25_terms t "
                                          "ON t.tid = po.tid WHERE po.prow = ANY(%s)", (list(stored),)).fetchall():
            stored[int(row)][term] = int(tf)
        impact = dict(self.meta(conn, "bm25_impact") or {})
        if impact.get("ref") is None:
            if _scalar(conn.execute("SELECT count(*) FROM bm25_postings")):
                report.problem("bm25: postings without a reference length for their impacts (meta bm25_impact)",
                               "bm25")
        else:  # every posting's impact is its tf part at the reference length (pruning relies on it)
            bad_imp = _scalar(conn.execute(
                "SELECT count(*) FROM bm25_postings WHERE abs(imp - tf / (tf + %(k1)s * (1 - %(b)s + %(b)s * dl "
                "/ %(ref)s))) > 1e-6 * imp + 1e-9",
                {"k1": float(impact["k1"]), "b": float(impact["b"]), "ref": float(impact["ref"])}))
            if bad_imp:
                report.problem(f"bm25: {bad_imp} posting(s) have an impact other than their tf part at the "
                               f"reference length", "bm25")
        self._check_bm25_index(conn, report, n, total)
        differ = 0
        for row, title, text, doc_len in sample:
            tokens = self.tokenizer(passage_text_for_bm25(title, text))
            differ += int(len(tokens) != doc_len or Counter(tokens) != stored[int(row)])
        if differ:
            report.problem(f"bm25: {differ} of {len(sample)} sampled passage(s) have postings that differ from "
                           f"their text tokenised again", "bm25")

    def _check_bm25_index(self, conn: psycopg.Connection, report: CheckReport, n: int, total: int) -> None:
        """The in-process index's pieces: readable, over exactly the stored passages, with their lengths
        and as many (term, passage) pairs as the postings table."""
        try:
            index = bm25_blobs.load(conn, self.config.bm25, None).index
        except (AmsragError, ValueError, KeyError, OSError) as exc:
            report.problem(f"bm25: the index in bm25_blobs cannot be read ({exc})", "bm25")
            return
        rows = np.asarray([int(r) for (r,) in conn.execute("SELECT prow FROM passages ORDER BY prow")], np.int64)
        pairs = int(_scalar(conn.execute("SELECT count(*) FROM bm25_postings")))
        if (index.stats.n_docs, index.stats.total_len) != (n, total) or not np.array_equal(index.rows, rows) \
                or int(index.stats.df.sum()) != pairs:
            report.problem(f"bm25: the index in bm25_blobs holds {len(index.rows)} passages of "
                           f"{index.stats.total_len} tokens and {int(index.stats.df.sum())} postings; the tables "
                           f"hold {n} of {total} and {pairs}", "bm25")

    @staticmethod
    def _check_dense(conn: psycopg.Connection, report: CheckReport) -> None:
        report.checked.append("dense")
        bad = _scalar(conn.execute("SELECT count(*) FROM passages WHERE NOT (vector_norm(embedding) BETWEEN %s AND %s)",
                                   (1 - NORM_TOLERANCE, 1 + NORM_TOLERANCE)))
        if bad:
            report.problem(f"dense: {bad} stored vector(s) are not unit-norm or not finite (repair embeds them "
                           f"again)", "dense")
        index = conn.execute("SELECT i.indisvalid, am.amname, pg_get_indexdef(i.indexrelid) FROM pg_index i "
                             "JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am am ON am.oid = c.relam "
                             "WHERE i.indexrelid = to_regclass(%s)", (f"{schema.SCHEMA}.{HNSW_INDEX}",)).fetchone()
        if index is None:
            report.problem(f"dense: the HNSW index {HNSW_INDEX} is missing", "dense")
        elif not index[0]:
            report.problem(f"dense: the HNSW index {HNSW_INDEX} is not valid (an interrupted build)", "dense")
        elif index[1] != "hnsw" or "vector_cosine_ops" not in index[2]:
            report.problem(f"dense: {HNSW_INDEX} is not an HNSW index of cosine distance ({index[2]})", "dense")

    @staticmethod
    def _check_graph(conn: psycopg.Connection, report: CheckReport) -> None:
        report.checked.append("graph")
        no_ner = _scalar(conn.execute("SELECT count(*) FROM passages p WHERE NOT EXISTS "
                                      "(SELECT 1 FROM graph_ner g WHERE g.prow = p.prow)"))
        if no_ner:
            report.problem(f"graph: {no_ner} passage(s) have no stored NER result (not in the entity graph)",
                           "graph")
        dangling = _scalar(conn.execute(
            "SELECT count(*) FROM mentions m WHERE NOT EXISTS (SELECT 1 FROM passages p WHERE p.prow = m.prow) "
            "OR NOT EXISTS (SELECT 1 FROM entities e WHERE e.eid = m.eid)"))
        if dangling:
            report.problem(f"graph: {dangling} mention(s) of a passage or entity that does not exist", "graph")
        bad_degree = _scalar(conn.execute(
            "SELECT count(*) FROM entities e LEFT JOIN (SELECT eid, count(*) AS n FROM mentions GROUP BY eid) c "
            "ON c.eid = e.eid WHERE e.degree <> coalesce(c.n, 0)"))
        if bad_degree:
            report.problem(f"graph: {bad_degree} entit(y/ies) with a degree other than their number of mentions",
                           "graph")
        lost = _scalar(conn.execute("SELECT count(*) FROM entity_surfaces s WHERE NOT EXISTS "
                                    "(SELECT 1 FROM entities e WHERE e.eid = s.eid)"))
        if lost:
            report.problem(f"graph: {lost} query surface(s) name an entity that does not exist", "graph")

    def _zh_graph_problem(self, conn: psycopg.Connection) -> str | None:
        return zh_graph_problem(
            (self.meta(conn, "params") or {}).get("graph", {}), expected_params(self.config)["graph"],
            lambda: int(_scalar(conn.execute("SELECT count(*) FROM passages WHERE title ~ %(c)s OR text ~ %(c)s",
                                             {"c": SPACELESS_CLASS}))))

    def _forget_zh_ner(self, conn: psycopg.Connection) -> None:
        """Before the graph is rewritten for other Chinese entity settings: drop the stored NER of the passages
        those settings decide (mostly Han), so that it runs again; spaCy's results for the others stay."""
        if self._zh_graph_problem(conn) is None:
            return
        han = conn.execute("SELECT prow, text FROM passages WHERE text ~ %s", (SPACELESS_CLASS,)).fetchall()
        stale = [int(r) for r, text in han if is_mostly_han(text)]
        conn.execute("DELETE FROM graph_ner WHERE prow = ANY(%s)", (stale,))

    def repair(self, components: Sequence[str] | None = None, progress: Progress | None = None) -> RepairReport:
        """Rebuild what `check` finds damaged (or the given `components`) from the passages, in one write
        transaction: BM25 tokenised again (terms, postings, lengths, statistics); the HNSW index built
        again (a stored vector that is not unit-norm is embedded again first; the others are kept);
        the entity graph rewritten (stored NER reused, spaCy runs only on passages without it)."""
        t0 = time.perf_counter()
        progress = progress or NullProgress()
        report = RepairReport(self.location)
        unknown = sorted(set(components or ()) - set(COMPONENTS))
        if unknown:
            raise InputError(f"unknown component(s) {', '.join(unknown)}; choose from {', '.join(COMPONENTS)}")
        with self._write() as conn:
            if components:
                todo = set(components)
            else:
                found = CheckReport(self.location)
                self._check(conn, found, progress)
                todo = set(found.repairable)
            bm25 = None
            if todo:
                if "bm25" in todo:
                    bm25 = self._rebuild_bm25(conn, progress)
                if "dense" in todo:
                    report.reembedded = self._rebuild_dense(conn, progress)
                if "graph" in todo:
                    self._forget_zh_ner(conn)
                    self._rewrite_graph(conn, [], [], {}, progress)
                for name, params in expected_params(self.config).items():
                    if name in todo:  # what the rebuilt component was built with (a graph's Chinese settings)
                        conn.execute("UPDATE meta SET value = jsonb_set(value, %s, %s) WHERE key = 'params'",
                                     ([name], Jsonb(params)))
                self._bump(conn, 0, 0)
        report.rebuilt = sorted(todo)
        if todo:
            self._written(_Change([], 0, 0, bulk="bm25" in todo, bm25=bm25), {})
        report.seconds = time.perf_counter() - t0
        return report

    def _rebuild_bm25(self, conn: psycopg.Connection, progress: Progress) -> BM25State:
        """Terms, postings, passage lengths, the collection statistics and the in-process index's pieces
        from the passages' text."""
        conn.execute("DELETE FROM bm25_postings")
        conn.execute("DELETE FROM bm25_terms")
        # impacts are written again, at a reference length the first page sets
        conn.execute("UPDATE meta SET value = jsonb_set(value, '{ref}', 'null') WHERE key = 'bm25_impact'")
        n = int(_scalar(conn.execute("SELECT count(*) FROM passages")))
        total, last = 0, 0
        with progress.task("repair: bm25", n) as adv:
            while True:
                page = conn.execute("SELECT prow, title, text FROM passages WHERE prow > %s ORDER BY prow LIMIT %s",
                                    (last, REPAIR_PAGE)).fetchall()
                if not page:
                    break
                docs = [(int(r), self.tokenizer(passage_text_for_bm25(title, text))) for r, title, text in page]
                conn.execute("UPDATE passages p SET doc_len = x.dl FROM unnest(%s::bigint[], %s::int[]) AS x(prow, dl) "
                             "WHERE p.prow = x.prow AND p.doc_len <> x.dl",
                             ([r for r, _ in docs], [len(toks) for _, toks in docs]))
                self._add_postings(conn, docs)
                total += sum(len(toks) for _, toks in docs)
                last = docs[-1][0]
                adv(len(docs))
        conn.execute("INSERT INTO meta (key, value) VALUES ('n_passages', to_jsonb(%s::bigint)) "
                     "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value", (n,))
        conn.execute("INSERT INTO meta (key, value) VALUES ('bm25_stats', jsonb_build_object('n_docs', %s::bigint, "
                     "'total_len', %s::bigint)) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value", (n, total))
        with progress.task("repair: bm25 index", 1) as adv:
            state = bm25_blobs.build(conn, self.config.bm25)
            adv(1)
        return state

    def _rebuild_dense(self, conn: psycopg.Connection, progress: Progress) -> int:
        """Embed again the passages whose stored vector is damaged, then build the HNSW index again;
        how many were embedded."""
        bad = conn.execute("SELECT prow, title, text FROM passages WHERE NOT (vector_norm(embedding) BETWEEN %s "
                           "AND %s) ORDER BY prow", (1 - NORM_TOLERANCE, 1 + NORM_TOLERANCE)).fetchall()
        if bad:
            with progress.task("repair: embed passages whose stored vector is damaged", len(bad)) as adv:
                fresh = self.encoder.encode([passage_text_for_embedding(title, text) for _, title, text in bad], adv)
            with conn.cursor() as cur:
                cur.executemany("UPDATE passages SET embedding = %s WHERE prow = %s",
                                [(np.asarray(v, dtype=np.float32), int(r[0])) for r, v in zip(bad, fresh, strict=True)])
        with progress.task("repair: dense (HNSW index)", 1) as adv:
            conn.execute(f"DROP INDEX IF EXISTS {HNSW_INDEX}")
            self._create_hnsw(conn)
            adv(1)
        return len(bad)
