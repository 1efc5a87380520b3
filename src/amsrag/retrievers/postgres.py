"""Retrievers over a PostgreSQL index (`amsrag.store.postgres.store.PostgresIndex`): BM25 in-process (or in
SQL), pgvector HNSW, PPR on the in-process copy of the entity graph.

Scores equal the embedded retrievers' (BM25 in-process exactly: the same index, read from the
database; in SQL up to float rounding: PostgreSQL sums in float8 where the embedded index uses
float32) and ties break by passage id, so both backends rank alike.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol, TypeVar

import numpy as np
import psycopg

from amsrag.config import AmsragConfig, GraphConfig
from amsrag.embed.encoder import Encoder
from amsrag.errors import IndexCorruptError, InputError
from amsrag.indexes.bm25 import BM25Index, BM25Tokenizer
from amsrag.indexes.entities import query_ner_keys
from amsrag.indexes.entity_graph import STRUCTURAL_FIELDS
from amsrag.indexes.pagerank import (
    MENTION,
    TITLE,
    extract_subgraph,
    passage_scores,
    seed_weights,
    top_candidates,
    top_passages,
)
from amsrag.indexes.query_checks import check_k, check_query
from amsrag.retrieve.dense import check_query_vector
from amsrag.retrievers.pg_gather import KEPT, read_gather
from amsrag.store.postgres.bm25_blobs import BM25State
from amsrag.store.postgres.graph_state import GENERATION_KEY, GraphCache, GraphState
from amsrag.store.postgres.graph_state import generation as graph_generation
from amsrag.store.postgres.rows import RowNames
from amsrag.topk import topk_indices
from amsrag.types import Hit

T = TypeVar("T")

HNSW_MAX_EF = 1000  # pgvector's upper bound for hnsw.ef_search
HNSW_WITHIN_SHARE = 0.25  # dense within a filter: pgvector's iterative index scan from this share, exact below
# (measured: at 20 % the exact scan 2.4x the unfiltered p50, the iterative 2.9x; at 30 % 3.4x against 2.1x)
HNSW_WITHIN_EF = 400  # its hnsw.ef_search: recall@10 >= 0.99 against the exact scan at 20-51 % (300: 0.98)
BITMAP_MAX_ROW = 1 << 27  # the allowed rows as a bitmap of at most 16 MB; past it the exact scan
BM25_PLAN_ENV = "AMSRAG_PG_BM25"  # "memory" (default), "exhaustive" or "pruned" (bm25_top)
BM25_PLANS = ("memory", "exhaustive", "pruned")
DESCRIBE_TRIES = 3  # an in-process copy found out of date by the id lookup: read again and rank again
# The top rows' ids and titles, and a generation of the same snapshot (is the in-process copy current?)
_DESCRIBE_SQL = """
SELECT coalesce((SELECT (value::text)::bigint FROM meta WHERE key = %s), 0),
       array_agg(prow), array_agg(id), array_agg(title)
FROM passages WHERE prow = ANY(%s::bigint[])
"""


def describe_at_generation(c: psycopg.Connection, key: str,
                           rows: np.ndarray) -> tuple[int, dict[int, tuple[str, str]]]:
    """The (id, title) of passage rows and the generation counted under meta `key`, in one statement
    (one snapshot): a copy ranked at that generation named rows that exist exactly when it is current."""
    row = c.execute(_DESCRIBE_SQL, (key, rows.tolist())).fetchone()
    if row is None:
        raise AssertionError("an aggregate query returned no row")
    gen, prows, ids, titles = row
    return int(gen), {int(r): (str(i), str(t)) for r, i, t in zip(prows or [], ids or [], titles or [], strict=True)}

# Lucene BM25 (bm25s method "lucene"): idf = ln(1 + (N - df + 0.5) / (df + 0.5)),
# tf part = tf / (tf + k1 * (1 - b + b * dl / avgdl)); a query term given twice counts twice.
# Every candidate tied with the k-th score is ordered by id before the cut.
# The collection statistics and the query's terms with their idf, shared by both BM25 queries.
_BM25_TERMS = """
WITH st AS (
    SELECT greatest((value->>'n_docs')::float8, 1) AS n,
           greatest((value->>'total_len')::float8, 1) / greatest((value->>'n_docs')::float8, 1) AS avgdl
    FROM meta WHERE key = 'bm25_stats'),
q AS (
    SELECT t.tid, x.qtf, ln(1 + (st.n - t.df + 0.5) / (t.df + 0.5)) AS idf
    FROM unnest(%(terms)s::text[], %(qtf)s::int[]) AS x(term, qtf)
    JOIN bm25_terms t ON t.term = x.term CROSS JOIN st)"""
_BM25_SUM = "sum(q.qtf * q.idf * po.tf / (po.tf + %(k1)s * (1 - %(b)s + %(b)s * po.dl / st.avgdl)))"

_BM25_SQL = _BM25_TERMS + f""",
agg AS MATERIALIZED (
    SELECT po.prow, {_BM25_SUM} AS s
    FROM q JOIN bm25_postings po ON po.tid = q.tid CROSS JOIN st
    GROUP BY po.prow),
cut AS (SELECT s FROM agg ORDER BY s DESC LIMIT %(k)s)
SELECT a.prow, a.s, p.id, p.title
FROM agg a JOIN passages p ON p.prow = a.prow
WHERE a.s >= (SELECT min(s) FROM cut) AND a.s > 0
ORDER BY a.s DESC, p.id
LIMIT %(k)s
"""

# The same top k through the server-side function (schema.BM25_FUNCTION): candidates from the heads of
# impact-ordered posting lists, scored exactly.
_BM25_TOP_SQL = ("SELECT prow, score, id, title FROM bm25_top(%(terms)s::text[], %(qtf)s::int[], "
                 "%(k1)s::float8, %(b)s::float8, %(k)s::int, false, %(depth)s::int)")

# The BM25 score of given passages: the same sums, restricted to those rows.
_BM25_ROWS_SQL = _BM25_TERMS + f"""
SELECT po.prow, {_BM25_SUM}
FROM q JOIN bm25_postings po ON po.tid = q.tid CROSS JOIN st
WHERE po.prow = ANY(%(rows)s)
GROUP BY po.prow
"""


class TableReader(Protocol):
    """What the retrievers need from the PostgreSQL index (`PostgresIndex` provides it)."""

    config: AmsragConfig
    tokenizer: BM25Tokenizer  # BM25's, as the passages were tokenised
    row_names: RowNames  # (id, title) of the passage rows reads have met
    graph_cache: GraphCache  # the in-process entity graph, by generation

    @property
    def encoder(self) -> Encoder: ...

    def read(self, fn: Callable[[psycopg.Connection], T]) -> T:
        """`fn` run on a pooled connection (retried once on a connection failure)."""
        ...

    def meta(self, conn: psycopg.Connection, key: str) -> Any:
        """The value stored under `key` in the index's meta table (None when absent)."""
        ...

    def bm25_index(self, conn: psycopg.Connection) -> BM25Index:
        """The in-process BM25 index, current as of what `conn` sees."""
        ...

    def bm25_state(self, conn: psycopg.Connection, generation: int | None = None) -> BM25State:
        """The in-process BM25 index at `generation` (None: as cached, read only when nothing is)."""
        ...


class PgBM25Retriever:
    name = "bm25"

    def __init__(self, index: TableReader) -> None:
        self.index = index
        self.tokenizer = index.tokenizer
        # the default plan, measured in docs/benchmarks/postgres.md: the in-process index scores in
        # about a millisecond where SQL costs ~1 us per posting (tens of ms at 25k-100k passages); of the
        # SQL plans, every posting in one statement beat the pruned `bm25_top` on the 25k corpus
        self.plan = plan_from_env()

    def search(self, query: str, k: int = 10, query_vector: np.ndarray | None = None,
               exhaustive: bool | None = None, depth: int | None = None, plan: str | None = None) -> list[Hit]:
        """The top `k` by Lucene BM25. Plan `memory`: the embedded store's index, kept in the database
        and cached in-process (one generation lookup, numpy scoring, one lookup of the top rows' ids);
        `exhaustive`: every posting of the query's terms scored in one statement; `pruned`: `bm25_top`
        (candidates from the heads of impact-ordered posting lists, scored exactly). All give the same
        top k. Default: `AMSRAG_PG_BM25` (memory); `exhaustive` True/False picks a SQL plan.
        `depth`: `bm25_top`'s first-pass postings per term (tests set it small to exercise pass 2)."""
        if exhaustive is not None:
            plan = "exhaustive" if exhaustive else "pruned"
        plan = plan or self.plan
        if plan not in BM25_PLANS:
            raise InputError(f"unknown BM25 plan {plan!r}; choose one of {', '.join(BM25_PLANS)}")
        check_query(query)
        check_k(k)
        if plan == "memory":
            return self._memory_search(query, k)
        exhaustive = plan == "exhaustive"
        counts = Counter(self.tokenizer(query))
        if not counts:
            return []
        terms = sorted(counts)
        cfg = self.index.config.bm25
        params = {"terms": terms, "qtf": [counts[t] for t in terms], "k1": float(cfg.k1), "b": float(cfg.b),
                  "k": k, "depth": depth}
        sql = _BM25_SQL if exhaustive else _BM25_TOP_SQL
        rows = self.index.read(lambda c: c.execute(sql, params).fetchall())
        return [Hit(id=pid, score=float(s), rank=n + 1, title=title, retriever=self.name, row=int(r))
                for n, (r, s, pid, title) in enumerate(rows)]

    def search_within(self, query: str, k: int, rows: np.ndarray,
                      query_vector: np.ndarray | None = None, total: int | None = None) -> list[Hit]:
        """The top `k` among passage rows `rows` (ascending): the in-process index's scores, the others masked."""
        check_query(query)
        check_k(k)
        return self._memory_search(query, k, rows)

    def _memory_search(self, query: str, k: int, within: np.ndarray | None = None) -> list[Hit]:
        """Score with the cached index, then one statement fetches the top rows' ids and the stored
        generation: when that is not the cached index's, the index is read again and the query scored
        again (so the ranking is always that of one committed state, in one round trip when current).
        `within`: only these rows (a metadata filter's)."""
        def run(c: psycopg.Connection) -> tuple[np.ndarray, np.ndarray, dict[int, tuple[str, str]]]:
            state = self.index.bm25_state(c)
            for _ in range(DESCRIBE_TRIES):
                index = state.index
                scores = index.scores(query)
                if within is not None:
                    scores = np.where(np.isin(index.rows, within), scores, np.float32(0.0))
                cand = np.flatnonzero(scores > 0)
                if cand.size > k:  # every passage tied with the k-th score, for the order by id
                    kth = np.partition(scores[cand], cand.size - k)[cand.size - k]
                    cand = cand[scores[cand] >= kth]
                rows = index.rows[cand]
                gen, found = describe_at_generation(c, "bm25_generation", rows)
                if gen == state.generation and len(found) == len(rows):
                    return scores[cand], rows, found
                state = self.index.bm25_state(c, gen)
            raise IndexCorruptError("the BM25 index names passages the passages table does not hold "
                                    "(run `amsrag index check`)")

        scores, rows, found = self.index.read(run)
        order = sorted(range(len(rows)), key=lambda i: (-float(scores[i]), found[int(rows[i])][0]))[:k]
        return [Hit(id=found[int(rows[i])][0], score=float(scores[i]), rank=n + 1, title=found[int(rows[i])][1],
                    retriever=self.name, row=int(rows[i])) for n, i in enumerate(order)]

    def batch_search(self, queries: Sequence[str], k: int = 10,
                     query_vectors: np.ndarray | None = None) -> list[list[Hit]]:
        return [self.search(q, k) for q in queries]

    def score_rows(self, query: str, rows: Sequence[int], plan: str | None = None) -> np.ndarray:
        """BM25 scores of the given passage rows for `query` (0 for a row without a query term)."""
        if (plan or self.plan) == "memory":
            wanted = [int(r) for r in rows]
            return self.index.read(lambda c: self.index.bm25_index(c).score_rows(query, wanted))
        counts = Counter(self.tokenizer(query))
        out = np.zeros(len(rows), dtype=np.float32)
        if not counts or not len(rows):
            return out
        terms = sorted(counts)
        cfg = self.index.config.bm25
        params = {"terms": terms, "qtf": [counts[t] for t in terms], "k1": cfg.k1, "b": cfg.b,
                  "rows": [int(r) for r in rows]}
        scores: dict[int, float] = dict(self.index.read(lambda c: c.execute(_BM25_ROWS_SQL, params).fetchall()))
        for i, r in enumerate(rows):
            out[i] = float(scores.get(int(r), 0.0))
        return out


def plan_from_env() -> str:
    plan = os.environ.get(BM25_PLAN_ENV, "").strip().lower() or "memory"
    if plan not in BM25_PLANS:
        raise InputError(f"{BM25_PLAN_ENV} must be one of {', '.join(BM25_PLANS)}, got {plan!r}")
    return plan


class PgDenseRetriever:
    """Candidates from pgvector (HNSW, cosine; an exact scan below `dense.hnsw_min_size` passages, as
    the embedded store), re-scored exactly in float32 so scores are true cosines."""

    name = "dense"

    def __init__(self, index: TableReader) -> None:
        self.index = index
        self._arrays: dict[int, tuple[np.ndarray, str]] = {}  # id(rows) -> (rows, their bigint[] literal)
        self._bitmaps: dict[int, tuple[np.ndarray, bytes]] = {}  # id(rows) -> (rows, their bitmap)

    def _rows_literal(self, rows: np.ndarray) -> str:
        """`rows` as a bigint[] literal, kept for arrays asked again (a filter's rows are one array for its life):
        psycopg's dump of a Python list of ints was half of a filtered search's time at 12k allowed rows."""
        kept = self._arrays.get(id(rows))
        if kept is not None and kept[0] is rows:
            return kept[1]
        literal = "{" + ",".join(map(str, np.asarray(rows, dtype=np.int64).tolist())) + "}"
        if len(self._arrays) > 8:
            self._arrays.clear()
        self._arrays[id(rows)] = (rows, literal)
        return literal

    def _rows_bitmap(self, rows: np.ndarray) -> bytes:
        """`rows` as a bitmap, bit r set for row r (in each byte from the least significant bit, as PostgreSQL's
        get_bit counts), kept like `_rows_literal`: about 3 KB at 25k passages where the array is 70 KB."""
        kept = self._bitmaps.get(id(rows))
        if kept is not None and kept[0] is rows:
            return kept[1]
        mask = np.zeros(int(rows[-1]) + 1, dtype=bool)
        mask[rows] = True
        bits = np.packbits(mask, bitorder="little").tobytes()
        if len(self._bitmaps) > 8:
            self._bitmaps.clear()
        self._bitmaps[id(rows)] = (rows, bits)
        return bits

    def search(self, query: str, k: int = 10, query_vector: np.ndarray | None = None,
               exact: bool = False) -> list[Hit]:
        check_query(query)
        check_k(k)
        qvec = check_query_vector(query_vector, 384)
        if qvec is None:
            qvec = self.index.encoder.encode_query(query)
        cfg = self.index.config.dense
        want = max(k + 10, k * 2)
        sql = DENSE_SQL.format(want=int(want))  # LIMIT inline: see DENSE_SQL
        params = {"q": qvec, "exact": bool(exact), "min_size": int(cfg.hnsw_min_size)}
        ef = str(min(HNSW_MAX_EF, max(cfg.hnsw_ef_search, want)))

        def fetch(c: psycopg.Connection) -> list[tuple]:
            # One round trip: the search's settings, local to its transaction, then the search. No parallel
            # workers: the gated-off exact branch of DENSE_SQL is planned as a parallel scan above ~100k
            # passages, and the workers start before its one-time filter is read (~5 ms of 12 at 200k).
            with c.pipeline(), c.transaction():
                c.execute("SELECT set_config('hnsw.ef_search', %s, true), "
                          "set_config('max_parallel_workers_per_gather', '0', true)", (ef,))
                # binary results: the candidates' vectors as text were ~3 ms of the ~5 ms search at 25k
                cur = c.execute(sql, params, binary=True)
            return cur.fetchall()

        return self._ranked(self.index.read(fetch), qvec, k)

    def search_within(self, query: str, k: int, rows: np.ndarray,
                      query_vector: np.ndarray | None = None, total: int | None = None) -> list[Hit]:
        """The top `k` among passage rows `rows` (a metadata filter's, ascending). With the `total` passages given
        (a filter's search), exactly over their vectors gathered into the process once and kept (`_gathered_within`)
        when they fit `pg_gather.KEPT`; else, when they are at least `HNSW_WITHIN_SHARE` of the `total`, pgvector's
        HNSW scanned iteratively with the filter in SQL (`_iterative_within`); else, or when that finds fewer than
        k, an exact scan of those rows by primary key, so k come back whenever k are allowed."""
        check_query(query)
        check_k(k)
        qvec = check_query_vector(query_vector, 384)
        if qvec is None:
            qvec = self.index.encoder.encode_query(query)
        if not len(rows):
            return []
        if total and KEPT.fits(len(rows), len(qvec)):
            gathered = self._gathered_within(qvec, k, rows)
            if gathered is not None:
                return gathered
        cfg = self.index.config.dense
        if (total and total >= cfg.hnsw_min_size and len(rows) >= HNSW_WITHIN_SHARE * total
                and int(rows[-1]) < BITMAP_MAX_ROW):
            found = self._iterative_within(qvec, k, rows)
            if len(found) >= min(k, len(rows)):
                return found
        sql = f"{DENSE_WITHIN_SQL} LIMIT {int(max(k + 10, k * 2))}"
        params = {"q": qvec, "rows": self._rows_literal(rows)}
        got = self.index.read(lambda c: c.execute(sql, params, binary=True).fetchall())
        return self._ranked(got, qvec, k)

    def _gathered_within(self, qvec: np.ndarray, k: int, rows: np.ndarray) -> list[Hit] | None:
        """The exact top `k` of the allowed rows' vectors kept in the process (read on the first query under these
        rows): the rows scoring at least the k-th are named in one statement with the stored generation; None
        when that is not the gather's (the gather is dropped, the caller searches in SQL)."""
        gather = KEPT.get(self, rows)
        if gather is None:
            gather = self.index.read(lambda c: read_gather(c, self._rows_literal(rows), len(qvec)))
            KEPT.put(self, rows, gather)
        if not len(gather.rows):
            return []
        scores = np.asarray(gather.vectors @ qvec, dtype=np.float32)
        cand = np.arange(len(scores))
        if len(scores) > k:  # every row tied with the k-th score, for the order by id
            kth = np.partition(scores, len(scores) - k)[len(scores) - k]
            cand = np.flatnonzero(scores >= kth)
        generation, found = self.index.read(lambda c: describe_at_generation(c, "generation", gather.rows[cand]))
        if generation != gather.generation or len(found) != len(cand):
            KEPT.drop(self, rows)
            return None
        named = [found[int(r)] for r in gather.rows[cand]]
        best = topk_indices(scores[cand], k, lambda i: named[i][0])
        return [Hit(id=named[i][0], score=float(scores[cand[i]]), rank=n + 1, title=named[i][1],
                    retriever=self.name, row=int(gather.rows[cand[i]])) for n, i in enumerate(best)]

    def _iterative_within(self, qvec: np.ndarray, k: int, rows: np.ndarray) -> list[Hit]:
        """The allowed rows' nearest by pgvector's iterative HNSW scan (`relaxed_order`, ef `HNSW_WITHIN_EF`): the
        index walks on until `want` rows pass the bitmap check or `hnsw.max_scan_tuples` is reached; the `want`
        are re-scored exactly. Sequential scans off: the planner guesses the bitmap check keeps 0.5 % of rows
        and would sort every passage instead (the exact answer, at 5-7x the unfiltered search)."""
        want = max(k + 10, k * 2)
        params = {"q": qvec, "bits": self._rows_bitmap(rows), "last": int(rows[-1])}
        ef = str(min(HNSW_MAX_EF, max(HNSW_WITHIN_EF, want)))
        sql = f"{DENSE_ITERATIVE_SQL} LIMIT {int(want)}"

        def fetch(c: psycopg.Connection) -> list[tuple]:
            with c.pipeline(), c.transaction():
                c.execute(ITERATIVE_SETTINGS_SQL, (ef,))
                cur = c.execute(sql, params, binary=True)
            return cur.fetchall()

        return self._ranked(self.index.read(fetch), qvec, k)

    def _ranked(self, got: list[tuple], qvec: np.ndarray, k: int) -> list[Hit]:
        """The top `k` of fetched (row, id, title, vector) candidates by exact inner product with `qvec`."""
        if not got:
            return []
        vectors = np.stack([np.asarray(r[3], dtype=np.float32) for r in got])
        scores = np.asarray(vectors @ qvec, dtype=np.float32)
        best = topk_indices(scores, k, lambda i: got[i][1])
        return [Hit(id=got[i][1], score=float(scores[i]), rank=n + 1, title=got[i][2], retriever=self.name,
                    row=int(got[i][0])) for n, i in enumerate(best)]

    def batch_search(self, queries: Sequence[str], k: int = 10,
                     query_vectors: np.ndarray | None = None) -> list[list[Hit]]:
        for q in queries:
            check_query(q)
        vecs = self.index.encoder.encode(list(queries)) if query_vectors is None else np.asarray(query_vectors)
        if len(vecs) != len(queries):
            raise InputError(f"{len(queries)} queries but {len(vecs)} query vectors")
        return [self.search(q, k, query_vector=v) for q, v in zip(queries, vecs, strict=True)]


# The dense candidates in one statement: an exact scan below `hnsw_min_size` passages (or when asked),
# the HNSW index above; the other branch's gate is a one-time filter, so it does not run. `+ 0` keeps
# the planner off the HNSW index (prepared plans cannot flip it). LIMIT is inline: a generic plan with
# LIMIT $n does not know the limit is small and may pick a full scan over the HNSW index.
# A metadata filter's candidates: its rows by primary key, scanned exactly (`+ 0`: not the HNSW index).
DENSE_WITHIN_SQL = ("SELECT prow, id, title, embedding FROM passages WHERE prow = ANY(%(rows)s::text::bigint[]) "
                    "ORDER BY (embedding <=> %(q)s) + 0")
# The allowed rows' nearest through the HNSW index: a bitmap of them checked on each row the scan meets
# (CASE: a row past the bitmap's end is not asked for, as get_bit would fail on it).
DENSE_ITERATIVE_SQL = ("SELECT prow, id, title, embedding FROM passages "
                       "WHERE CASE WHEN prow <= %(last)s THEN get_bit(%(bits)s::bytea, prow::int) = 1 ELSE false END "
                       "ORDER BY embedding <=> %(q)s")
ITERATIVE_SETTINGS_SQL = ("SELECT set_config('hnsw.ef_search', %s, true), "
                          "set_config('hnsw.iterative_scan', 'relaxed_order', true), "
                          "set_config('enable_seqscan', 'off', true), "
                          "set_config('max_parallel_workers_per_gather', '0', true)")
DENSE_N = "(SELECT (value::text)::bigint FROM meta WHERE key = 'n_passages')"
DENSE_SQL = f"""
(SELECT prow, id, title, embedding FROM passages WHERE %(exact)s OR {DENSE_N} < %(min_size)s
 ORDER BY (embedding <=> %(q)s) + 0 LIMIT {{want}})
UNION ALL
(SELECT prow, id, title, embedding FROM passages WHERE NOT (%(exact)s OR {DENSE_N} < %(min_size)s)
 ORDER BY embedding <=> %(q)s LIMIT {{want}})
"""


class PgEntityGraph:
    """The entity graph in tables; `rank` runs the embedded graph's personalized PageRank on the copy
    each reader process keeps (graph_state.py), then one statement names the top passages and says
    whether the copy was current."""

    def __init__(self, index: TableReader, config: GraphConfig) -> None:
        self.index = index
        self.config = config
        self._keys: dict[int, str] = {}  # entity id -> key, as bridge_entities met them

    def with_config(self, config: GraphConfig) -> PgEntityGraph:
        structural = {f: getattr(self.index.config.graph, f) for f in STRUCTURAL_FIELDS}
        return PgEntityGraph(self.index, config.model_copy(update=structural))

    def rank(self, query: str, seed_rows: Sequence[tuple[int, float]], k: int) -> list[tuple[int, float, str]]:
        query, k = check_query(query), check_k(k)
        ner_keys = self._query_ner_keys(query)
        cache = self.index.graph_cache

        def run(c: psycopg.Connection) -> tuple[np.ndarray, np.ndarray, dict[int, tuple[str, str]]]:
            state = cache.latest() or cache.at(c)
            for _ in range(DESCRIBE_TRIES):
                rows, scores = self._candidates(state, query, ner_keys, seed_rows, k)
                gen, found = describe_at_generation(c, GENERATION_KEY, rows)
                if gen == state.generation and len(found) == len(rows):
                    return rows, scores, found
                state = cache.at(c, gen)
            raise IndexCorruptError("the entity graph names passages the passages table does not hold "
                                    "(run `amsrag index check`)")

        rows, scores, found = self.index.read(run)
        self.index.row_names.update(found)  # `describe_rows` of the ranked rows needs no round trip
        return top_passages(rows, scores, k, {r: pid for r, (pid, _) in found.items()})

    def _candidates(self, state: GraphState, query: str, ner_keys: list[str],
                    seed_rows: Sequence[tuple[int, float]], k: int) -> tuple[np.ndarray, np.ndarray]:
        """The rows that can be in the top k and their scores, ranked as the embedded graph ranks."""
        sub = extract_subgraph(state.matrix, state.by_entity, state.degree, state.query_entities(query, ner_keys),
                               seed_weights(seed_rows, state), self.config)
        if sub is None:
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        scores = passage_scores(sub, state.idf, self.config)
        cand = top_candidates(scores, k)
        return sub.passages[cand], scores[cand]

    def _query_ner_keys(self, query: str) -> list[str]:
        cfg = self.config
        if not (cfg.query_ner and cfg.ner):
            return []
        return query_ner_keys(query, cfg.ner_labels, cfg.min_mention_chars, cfg.ner_zh)

    def query_entities(self, query: str) -> list[int]:
        """Entity ids the query mentions (surface forms, plus NER when `query_ner`), as `rank` seeds from."""
        query = check_query(query)
        ner_keys = self._query_ner_keys(query)
        cache = self.index.graph_cache
        return self.index.read(lambda c: cache.at(c, graph_generation(c)).query_entities(query, ner_keys))

    def entity_overlap(self, rows: Sequence[int], entities: Sequence[int]) -> np.ndarray:
        """Per passage row, how many of `entities` it mentions."""
        out = np.zeros(len(rows), dtype=np.float64)
        if not len(rows) or not len(entities):
            return out
        counts: dict[int, int] = dict(self.index.read(lambda c: c.execute(
            "SELECT prow, count(*) FROM mentions WHERE prow = ANY(%s) AND eid = ANY(%s) GROUP BY prow",
            ([int(r) for r in rows], sorted({int(e) for e in entities}))).fetchall()))
        for i, r in enumerate(rows):
            out[i] = float(counts.get(int(r), 0))
        return out

    def bridge_entities(self, rows: Sequence[int], exclude: Iterable[int], limit: int) -> list[tuple[int, int]]:
        """(entity id, passage row) of the entities the passages mention that could lead elsewhere, as the
        embedded graph's `bridge_entities`: not their title, not in `exclude`, not a hub; passage by
        passage in the given order, rarer entities first, each entity once."""
        wanted = [int(r) for r in rows]
        if not wanted or limit <= 0:
            return []
        found = self.index.read(lambda c: c.execute(
            "SELECT m.prow, m.eid, e.degree, e.key FROM mentions m JOIN entities e ON e.eid = m.eid "
            "WHERE m.prow = ANY(%s) AND m.kind = %s AND e.degree <= %s",
            (wanted, MENTION, self.config.max_entity_degree)).fetchall())
        by_row: dict[int, list[tuple[int, str, int]]] = {}
        for row, eid, degree, key in found:
            by_row.setdefault(int(row), []).append((int(degree), str(key), int(eid)))
            self._keys[int(eid)] = str(key)
        skip = {int(e) for e in exclude}
        out: list[tuple[int, int]] = []
        for row in wanted:
            for _, _, eid in sorted(by_row.get(row, [])):  # rarer (lower degree = higher idf) first, then key
                if eid in skip:
                    continue
                skip.add(eid)
                out.append((eid, row))
                if len(out) >= limit:
                    return out
        return out

    def entity_key_of(self, entity: int) -> str:
        key = self._keys.get(int(entity))
        if key is None:
            row = self.index.read(lambda c: c.execute("SELECT key FROM entities WHERE eid = %s",
                                                      (int(entity),)).fetchone())
            if row is None:
                raise InputError(f"no entity {entity} in the graph")
            key = self._keys[int(entity)] = str(row[0])
        return key

    def title_rows(self, entity: int) -> list[int]:
        """Passage rows whose own title is `entity`."""
        found = self.index.read(lambda c: c.execute(
            "SELECT prow FROM mentions WHERE eid = %s AND kind = %s ORDER BY prow", (int(entity), TITLE)).fetchall())
        return [int(r) for (r,) in found]
