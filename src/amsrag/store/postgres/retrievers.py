"""Retrievers over the PostgreSQL tables: BM25 in-process (or in SQL), pgvector HNSW, PPR on the
fetched subgraph.

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
import scipy.sparse as sp

from amsrag.config import AmsragConfig, GraphConfig
from amsrag.embed.encoder import Encoder
from amsrag.errors import IndexCorruptError, InputError
from amsrag.retrieve.base import check_k, check_query
from amsrag.retrieve.bm25 import BM25Index, BM25Tokenizer
from amsrag.retrieve.dense import check_query_vector
from amsrag.retrieve.entities import SurfaceMatcher, has_spaceless, query_ner_keys
from amsrag.retrieve.graph import STRUCTURAL_FIELDS
from amsrag.retrieve.pagerank import (
    MENTION,
    TITLE,
    entity_idf,
    entity_major,
    extract_subgraph,
    passage_scores,
    top_passages,
)
from amsrag.retrieve.topk import topk_indices
from amsrag.store.postgres.bm25_blobs import BM25State
from amsrag.types import Hit, normalise_whitespace

T = TypeVar("T")

HNSW_MAX_EF = 1000  # pgvector's upper bound for hnsw.ef_search
BM25_PLAN_ENV = "AMSRAG_PG_BM25"  # "memory" (default), "exhaustive" or "pruned" (bm25_top)
BM25_PLANS = ("memory", "exhaustive", "pruned")
DESCRIBE_TRIES = 3  # the cached BM25 index found out of date by the id lookup: read again and score again
# The top rows' ids and titles, and the BM25 generation of the same snapshot (is the cached index current?)
_DESCRIBE_SQL = """
SELECT (SELECT (value::text)::bigint FROM meta WHERE key = 'bm25_generation'),
       array_agg(prow), array_agg(id), array_agg(title)
FROM passages WHERE prow = ANY(%s::bigint[])
"""

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


ROW_NAMES_MAX = 200_000  # passage rows whose (id, title) a PostgresIndex keeps; past it, it starts over


class RowNames:
    """Passage row -> (id, title), as far as reads have met them. A row's id and title never change and
    a row number is never reused (passages.prow), so an entry never goes stale; thread-safe for the
    plain dict operations it uses."""

    def __init__(self, limit: int = ROW_NAMES_MAX) -> None:
        self.limit = limit
        self._names: dict[int, tuple[str, str]] = {}

    def get(self, row: int) -> tuple[str, str] | None:
        return self._names.get(row)

    def update(self, names: dict[int, tuple[str, str]]) -> None:
        if len(self._names) + len(names) > self.limit:
            self._names = {}
        self._names.update(names)


class TableReader(Protocol):
    """What the retrievers need from the PostgreSQL index (`PostgresIndex` provides it)."""

    config: AmsragConfig
    tokenizer: BM25Tokenizer  # BM25's, as the passages were tokenised
    row_names: RowNames  # (id, title) of the passage rows reads have met

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

    def _memory_search(self, query: str, k: int) -> list[Hit]:
        """Score with the cached index, then one statement fetches the top rows' ids and the stored
        generation: when that is not the cached index's, the index is read again and the query scored
        again (so the ranking is always that of one committed state, in one round trip when current)."""
        def run(c: psycopg.Connection) -> tuple[np.ndarray, np.ndarray, dict[int, tuple[str, str]]]:
            state = self.index.bm25_state(c)
            for _ in range(DESCRIBE_TRIES):
                index = state.index
                scores = index.scores(query)
                cand = np.flatnonzero(scores > 0)
                if cand.size > k:  # every passage tied with the k-th score, for the order by id
                    kth = np.partition(scores[cand], cand.size - k)[cand.size - k]
                    cand = cand[scores[cand] >= kth]
                rows = index.rows[cand]
                row = c.execute(_DESCRIBE_SQL, (rows.tolist(),)).fetchone()
                if row is None:
                    raise AssertionError("an aggregate query returned no row")
                gen, prows, ids, titles = row
                found = {int(r): (str(i), str(t)) for r, i, t in zip(prows or [], ids or [], titles or [],
                                                                      strict=True)}
                if gen == state.generation and len(found) == len(rows):
                    return scores[cand], rows, found
                state = self.index.bm25_state(c, int(gen))
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
            with c.pipeline():  # one round trip: the search's ef, then the search
                c.execute("SELECT set_config('hnsw.ef_search', %s, false)", (ef,))
                cur = c.execute(sql, params)
            return cur.fetchall()

        got = self.index.read(fetch)
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
DENSE_N = "(SELECT (value::text)::bigint FROM meta WHERE key = 'n_passages')"
DENSE_SQL = f"""
(SELECT prow, id, title, embedding FROM passages WHERE %(exact)s OR {DENSE_N} < %(min_size)s
 ORDER BY (embedding <=> %(q)s) + 0 LIMIT {{want}})
UNION ALL
(SELECT prow, id, title, embedding FROM passages WHERE NOT (%(exact)s OR {DENSE_N} < %(min_size)s)
 ORDER BY embedding <=> %(q)s LIMIT {{want}})
"""


def candidate_surfaces(text: str, max_len: int) -> list[str]:
    """Every substring of `text` that could be a whole-word match of a surface form no longer than
    `max_len` (it may not start or end inside a word): looking these up finds exactly the surface
    forms the full matcher would find, without holding all of them in memory."""
    n = len(text)
    word = [ch.isalnum() for ch in text]
    # as in `SurfaceMatcher`: next to a Han or kana character every position is a word boundary
    joined = [0 < i < n and word[i - 1] and word[i] and not (has_spaceless(text[i - 1]) or has_spaceless(text[i]))
              for i in range(n + 1)]
    starts = [s for s in range(n) if not joined[s]]
    ends = [e for e in range(1, n + 1) if not joined[e]]
    out = set()
    j0 = 0
    for s in starts:
        while j0 < len(ends) and ends[j0] <= s:
            j0 += 1
        for e in ends[j0:]:
            if e - s > max_len:
                break
            out.add(text[s:e])
    return sorted(out)


class PgEntityGraph:
    """The entity graph in tables; `rank` fetches the seeds' neighbourhood and runs the embedded
    graph's personalized PageRank on it, with global entity degrees and idf."""

    def __init__(self, index: TableReader, config: GraphConfig) -> None:
        self.index = index
        self.config = config
        self._keys: dict[int, str] = {}  # entity id -> key, as bridge_entities met them
        self._max_surface: int | None = None  # the longest stored surface form, as last read

    def with_config(self, config: GraphConfig) -> PgEntityGraph:
        structural = {f: getattr(self.index.config.graph, f) for f in STRUCTURAL_FIELDS}
        return PgEntityGraph(self.index, config.model_copy(update=structural))

    def rank(self, query: str, seed_rows: Sequence[tuple[int, float]], k: int) -> list[tuple[int, float, str]]:
        query, k = check_query(query), check_k(k)
        ner_keys = self._query_ner_keys(query)
        return self.index.read(lambda c: self._rank(c, query, ner_keys, seed_rows, k))

    def _query_ner_keys(self, query: str) -> list[str]:
        cfg = self.config
        if not (cfg.query_ner and cfg.ner):
            return []
        return query_ner_keys(query, cfg.ner_labels, cfg.min_mention_chars, cfg.ner_zh)

    def query_entities(self, query: str) -> list[int]:
        """Entity ids the query mentions (surface forms, plus NER when `query_ner`), as `rank` seeds from."""
        query = check_query(query)
        ner_keys = self._query_ner_keys(query)
        return sorted(self.index.read(lambda c: self._query_entities(c, query, ner_keys)))

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

    def _query_entities(self, c: psycopg.Connection, query: str, ner_keys: list[str]) -> set[int]:
        row = c.execute("SELECT value FROM meta WHERE key = 'graph_max_surface'").fetchone()
        text = normalise_whitespace(query)
        found = c.execute("SELECT surface, eid FROM entity_surfaces WHERE surface = ANY(%s)",
                          (candidate_surfaces(text, int(row[0]) if row else 0),)).fetchall()
        matcher = SurfaceMatcher([s for s, _ in found], [e for _, e in found])
        query_ents = {e for _, _, e in matcher.find(text)}
        if ner_keys:
            query_ents |= {e for (e,) in c.execute("SELECT eid FROM entities WHERE key = ANY(%s)",
                                                   (ner_keys,)).fetchall()}
        return query_ents

    def _rank(self, c: psycopg.Connection, query: str, ner_keys: list[str],
              seed_rows: Sequence[tuple[int, float]], k: int) -> list[tuple[int, float, str]]:
        """One statement fetches everything the ranking needs (a second one only when the longest stored
        surface form grew past the length the candidates were cut at); the surface matcher then picks
        the query's entities among the candidates, and the neighbourhood is narrowed to exactly what
        the per-step queries fetched: the seeds' mentions and the mentions of the open (non-hub)
        entities among the query's and the seeds' entities."""
        cfg = self.config
        weights: dict[int, float] = {}
        for row, w in seed_rows:
            if w > 0:
                weights[int(row)] = weights.get(int(row), 0.0) + float(w)
        text = normalise_whitespace(query)
        cap = len(text) if self._max_surface is None else min(len(text), self._max_surface)
        while True:
            got = c.execute(_NEIGHBOURHOOD_SQL, {"cands": candidate_surfaces(text, cap), "ner": ner_keys,
                                                 "seeds": sorted(weights), "maxdeg": cfg.max_entity_degree,
                                                 }).fetchall()
            n_passages, max_surface = next((int(a), int(b)) for tag, a, b, *_ in got if tag == 0)
            self._max_surface = max_surface
            if max_surface <= cap or cap >= len(text):
                break
            cap = min(len(text), max_surface)
        by_tag: dict[int, list[tuple[Any, Any, Any, Any, Any]]] = {}
        for tag, a, b, x, name, title in got:
            by_tag.setdefault(int(tag), []).append((a, b, x, name, title))
        found = by_tag.get(1, [])
        matcher = SurfaceMatcher([str(t) for _, _, _, t, _ in found], [int(e) for _, e, _, _, _ in found])
        query_ents = {e for _, _, e in matcher.find(text)} | {int(e) for e, *_ in by_tag.get(2, [])}
        known = {int(r) for r, *_ in by_tag.get(3, [])}
        weights = {r: w for r, w in weights.items() if r in known}
        if not weights and not query_ents:
            return []
        edges: dict[tuple[int, int], int] = {(int(r), int(e)): int(kind) for r, e, kind, *_ in by_tag.get(4, [])}
        ents = sorted(query_ents | {e for _, e in edges})
        fetched: dict[int, int] = {int(e): int(d) for e, d, *_ in by_tag.get(5, [])}
        degree = {e: fetched[e] for e in ents if e in fetched}
        open_ents = {e for e in ents if degree.get(e, 0) <= cfg.max_entity_degree}
        for r, e, kind, *_ in by_tag.get(6, []):
            if int(e) in open_ents:
                edges[(int(r), int(e))] = int(kind)
        rows = sorted({r for r, _ in edges} | set(weights))
        names = {int(r): (str(pid), str(title)) for r, _, _, pid, title in by_tag.get(7, [])}
        self.index.row_names.update(names)  # the ranked rows' titles: `describe_rows` needs no round trip
        ids = {r: pid for r, (pid, _) in names.items()}
        return _local_ppr(cfg, n_passages, rows, ents, degree, edges, ids, sorted(query_ents), weights, k)


# The graph neighbourhood of a query in one statement, rows tagged by what they are: 0 (n_passages,
# longest surface), 1 (-, eid, -, surface) the entity surfaces among the query's candidate substrings,
# 2 (eid) the entities of the query's NER keys, 3 (prow) the seeds in the graph, 4 (prow, eid, kind)
# the seeds' mentions, 5 (eid, degree) the degrees of all those entities, 6 (prow, eid, kind) the
# mentions of the non-hub ones among them, 7 (prow, -, -, id, title) the passages of every row met.
# `= ANY(ARRAY(...))`, not `IN (...)`: the planner cannot size a CTE, and with `IN` it hash-joined the
# few wanted entities against a sequential scan of all of `entities` and `mentions` (23 of 42 ms at
# 25k passages); an array gives index probes whatever the size of the tables.
_NEIGHBOURHOOD_SQL = """
WITH sf AS MATERIALIZED (SELECT surface, eid FROM entity_surfaces WHERE surface = ANY(%(cands)s::text[])),
nk AS MATERIALIZED (SELECT eid FROM entities WHERE key = ANY(%(ner)s::text[])),
seeds AS MATERIALIZED (SELECT prow FROM graph_ner WHERE prow = ANY(%(seeds)s::bigint[])),
sm AS MATERIALIZED (SELECT m.prow, m.eid, m.kind FROM mentions m WHERE m.prow IN (SELECT prow FROM seeds)),
ents AS MATERIALIZED (
    SELECT e.eid, e.degree FROM entities e
    WHERE e.eid = ANY(ARRAY(SELECT eid FROM sf UNION SELECT eid FROM nk UNION SELECT eid FROM sm))),
em AS MATERIALIZED (
    SELECT m.prow, m.eid, m.kind FROM mentions m
    WHERE m.eid = ANY(ARRAY(SELECT eid FROM ents WHERE degree <= %(maxdeg)s))),
rws AS (SELECT prow FROM sm UNION SELECT prow FROM em UNION SELECT prow FROM seeds)
SELECT 0, (SELECT (value::text)::bigint FROM meta WHERE key = 'n_passages'),
       coalesce((SELECT (value::text)::bigint FROM meta WHERE key = 'graph_max_surface'), 0), NULL::int, NULL::text,
       NULL::text
UNION ALL SELECT 1, NULL, eid, NULL, surface, NULL FROM sf
UNION ALL SELECT 2, eid, NULL, NULL, NULL, NULL FROM nk
UNION ALL SELECT 3, prow, NULL, NULL, NULL, NULL FROM seeds
UNION ALL SELECT 4, prow, eid, kind, NULL, NULL FROM sm
UNION ALL SELECT 5, eid, degree, NULL, NULL, NULL FROM ents
UNION ALL SELECT 6, prow, eid, kind, NULL, NULL FROM em
UNION ALL SELECT 7, p.prow, NULL, NULL, p.id, p.title FROM passages p WHERE p.prow = ANY(ARRAY(SELECT prow FROM rws))
"""


def _local_ppr(cfg: GraphConfig, n_passages: int, rows: list[int], ents: list[int], degree: dict[int, int],
               edges: dict[tuple[int, int], int], ids: dict[int, str], query_ents: list[int],
               weights: dict[int, float], k: int) -> list[tuple[int, float, str]]:
    """The embedded graph's ranking (`amsrag.retrieve.pagerank`) on the neighbourhood, with the
    global entity degrees and idf (so hubs and weights are exactly as in the whole graph)."""
    row_pos = {r: i for i, r in enumerate(rows)}
    ent_pos = {e: i for i, e in enumerate(ents)}
    keys = list(edges)
    data = np.fromiter((edges[x] for x in keys), dtype=np.int8, count=len(keys))
    r_idx = np.fromiter((row_pos[r] for r, _ in keys), dtype=np.int64, count=len(keys))
    e_idx = np.fromiter((ent_pos[e] for _, e in keys), dtype=np.int64, count=len(keys))
    matrix = sp.csr_array((data, (r_idx, e_idx)), shape=(len(rows), len(ents)), dtype=np.int8)
    matrix.sort_indices()
    glob = np.array([degree.get(e, 0) for e in ents], dtype=np.int64)
    sub = extract_subgraph(matrix, entity_major(matrix), glob, [ent_pos[e] for e in query_ents],
                           {row_pos[r]: w for r, w in sorted(weights.items())}, cfg)
    if sub is None:
        return []
    scores = passage_scores(sub, entity_idf(glob, n_passages), cfg)
    local_ids = [ids[r] for r in rows]
    return [(rows[i], s, pid) for i, s, pid in top_passages(sub.passages, scores, k, local_ids)]
