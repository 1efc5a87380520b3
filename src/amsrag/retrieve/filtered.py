"""Retrieval inside a metadata filter: retrievers that rank within the allowed store rows
(`amsrag.indexes.allowed_rows.AllowedRows`), so a filtered top-k holds k passages whenever k allowed passages match.

BM25 scores every passage anyway: disallowed rows are masked before the top-k. Dense search is exact
over the gathered allowed vectors when they are few (the gather kept for the next query under the same
filter and index, `GatheredVectors`, within a memory budget), else the unfiltered search masked: exact, or
HNSW asked for more candidates (about 2k / the allowed share, deeper until k are allowed) beside the masked
delta (hnswlib's own `knn_query(filter=…)` calls Python per visited node: 3-15× slower at 25k passages,
`benchmarks/filters.py`). The entity graph walks from allowed seeds and ranks deeper until k
allowed passages are found; any other retriever is searched deeper the same way (k·4, k·16, … up to
the index size), keeping only allowed hits.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Protocol, runtime_checkable

import numpy as np

from amsrag.indexes.allowed_rows import AllowedRows
from amsrag.indexes.query_checks import check_k, check_query
from amsrag.kept_pairs import KeptByPair
from amsrag.retrieve.base import Retriever, RowLookup, to_hits
from amsrag.retrieve.bm25 import BM25Retriever
from amsrag.retrieve.dense import DenseRetriever, check_query_vector
from amsrag.retrieve.graph import GraphRetriever
from amsrag.topk import topk_indices
from amsrag.types import Hit

GATHER_SHARE = 0.1  # dense: exact search over the gathered allowed vectors up to this share of the index
GATHER_KEPT_BYTES = 256 << 20  # gathered allowed vectors kept across queries, in all (least recently used out)
GATHER_KEPT_MAX = 64 << 20  # the largest gather kept (a larger one is gathered again for each query)
DEEPEN = 4  # a deepened search asks for this many times more hits each round


class GatheredVectors(KeptByPair[np.ndarray]):
    """Allowed vectors gathered from a dense index, kept across queries: one matrix per (allowed rows, vector
    index) pair (`amsrag.kept_pairs`). A store resolves a filter again when its passages or documents' metadata
    change (a new `AllowedRows`), and a write makes a new `VectorIndex`, so a kept gather never outlives what it
    was gathered from."""

    def size(self, value: np.ndarray) -> int:
        return int(value.nbytes)

    def put(self, first: object, second: object, value: np.ndarray) -> bool:
        """Keep the vectors of `first` (`AllowedRows`) among `second` (`VectorIndex`) when they fit."""
        value.flags.writeable = False  # shared by every query under the filter from now on
        return super().put(first, second, value)


GATHERED = GatheredVectors(GATHER_KEPT_BYTES, GATHER_KEPT_MAX)


def _ranked_hits(rows: np.ndarray, scores: np.ndarray, k: int, lookup: RowLookup, name: str,
                 min_score: float | None = None) -> list[Hit]:
    best = topk_indices(scores, k, lambda i: lookup.describe_rows([int(rows[i])])[0][0], min_score=min_score)
    info = lookup.describe_rows([int(rows[i]) for i in best])
    return [Hit(id=pid, score=float(scores[i]), rank=n + 1, title=title, retriever=name, row=int(rows[i]))
            for n, (i, (pid, title)) in enumerate(zip(best, info, strict=True))]


class FilteredBM25:
    """BM25 over the allowed passages: every live passage is scored, the disallowed masked out."""

    def __init__(self, inner: BM25Retriever, allowed: AllowedRows) -> None:
        self.inner, self.allowed, self.name = inner, allowed, inner.name

    def search(self, query: str, k: int = 10, query_vector: np.ndarray | None = None) -> list[Hit]:
        check_query(query)
        check_k(k)
        rows = self.inner.index.rows
        scores = np.where(self.allowed.mask(rows), self.inner.index.scores(query), np.float32(-1.0))
        return _ranked_hits(rows, scores, k, self.inner.lookup, self.name, min_score=0.0)

    def batch_search(self, queries: Sequence[str], k: int = 10,
                     query_vectors: np.ndarray | None = None) -> list[list[Hit]]:
        return [self.search(q, k) for q in queries]

    def score_rows(self, query: str, rows: Sequence[int]) -> np.ndarray:
        return self.inner.score_rows(query, rows)


class FilteredDense:
    """Dense search over the allowed passages: a gather of their vectors when they are few, else the
    unfiltered search (exact, or HNSW asked deeper until k allowed candidates come back) with the mask."""

    def __init__(self, inner: DenseRetriever, allowed: AllowedRows) -> None:
        self.inner, self.allowed, self.name = inner, allowed, inner.name

    def search(self, query: str, k: int = 10, query_vector: np.ndarray | None = None,
               exact: bool = False) -> list[Hit]:
        check_query(query)
        check_k(k)
        index = self.inner.index
        qvec = check_query_vector(query_vector, index.dim)
        if qvec is None:
            qvec = self.inner.encoder.encode_query(query)
        if not len(index.rows):
            return []
        live = self.allowed.among(index.rows)
        if not len(live):
            return []
        if len(live) <= GATHER_SHARE * len(index.rows):  # a gather of few vectors beats any wider search
            vectors = GATHERED.get(self.allowed, index)
            if vectors is None:
                vectors = index.vectors_for_rows(live)
                GATHERED.put(self.allowed, index, vectors)
            scores = np.asarray(vectors @ qvec, dtype=np.float32)
            return _ranked_hits(live, scores, k, self.inner.lookup, self.name)
        if index.hnsw is not None and not exact:
            found = self._graph_candidates(qvec, k, len(live) / len(index.rows))
            if found is not None:
                return _ranked_hits(*found, k, self.inner.lookup, self.name)
        rows, scores = index.scored_candidates(qvec, k, exact=True)  # every passage, no copy of the vectors
        keep = self.allowed.contains(rows)
        return _ranked_hits(rows[keep], scores[keep], k, self.inner.lookup, self.name)

    def _graph_candidates(self, qvec: np.ndarray, k: int, share: float) -> tuple[np.ndarray, np.ndarray] | None:
        """HNSW's candidates from the base, asked for about 2k/`share` (a depth of k/`share`, of which
        `_hnsw_labels` asks twice as many) and deeper (×4) until k are allowed, beside the allowed delta; None
        when the search would grow past a quarter of the base (then the exact search runs)."""
        index = self.inner.index
        base_live = len(index.base_rows) - len(index.dead)
        depth = max(k, int(np.ceil(k / max(share, 1e-6))))
        while True:
            if 2 * depth > base_live // 4:
                return None
            labels = index._hnsw_labels(qvec, depth)
            labels = labels[self.allowed.contains(labels)]
            if len(labels) >= k:
                break
            depth *= DEEPEN
        delta = index.delta_rows[self.allowed.contains(index.delta_rows)]
        rows = np.concatenate([labels, delta])
        return rows, np.asarray(index.vectors_for_rows(rows) @ qvec, dtype=np.float32)

    def batch_search(self, queries: Sequence[str], k: int = 10,
                     query_vectors: np.ndarray | None = None) -> list[list[Hit]]:
        vecs = self.inner.encoder.encode(list(queries)) if query_vectors is None else np.asarray(query_vectors)
        return [self.search(q, k, query_vector=v) for q, v in zip(queries, vecs, strict=True)]


class _FilteredBridges:
    """An entity graph's bridges (the second hop) leading to allowed passages only."""

    def __init__(self, graph: Any, allowed: AllowedRows) -> None:
        self.graph, self.allowed = graph, allowed

    def query_entities(self, query: str) -> list[int]:
        return list(self.graph.query_entities(query))

    def bridge_entities(self, rows: Sequence[int], exclude: Iterable[int], limit: int) -> list[tuple[int, int]]:
        return list(self.graph.bridge_entities(rows, exclude, limit))

    def entity_key_of(self, entity: int) -> str:
        return str(self.graph.entity_key_of(entity))

    def title_rows(self, entity: int) -> list[int]:
        return [r for r in self.graph.title_rows(entity) if r in self.allowed]

    def rank(self, query: str, seed_rows: Sequence[tuple[int, float]], k: int) -> list[tuple[int, float, str]]:
        return list(self.graph.rank(query, seed_rows, k))


class FilteredGraph:
    """The entity graph walked from allowed seeds (its seeders filtered), ranked deeper until k allowed."""

    def __init__(self, inner: GraphRetriever[Any], allowed: AllowedRows, seeders: list[Retriever],
                 size: int) -> None:
        self.inner, self.allowed, self.name, self.size = inner, allowed, inner.name, size
        self.seeders = seeders
        self.graph = _FilteredBridges(inner.graph, allowed)

    def _hits(self, query: str, seeds: list[tuple[int, float]], k: int) -> list[Hit]:
        depth = k
        while True:
            ranked = [r for r in self.inner.graph.rank(query, seeds, depth) if r[0] in self.allowed]
            if len(ranked) >= k or depth >= self.size:
                break
            depth = min(self.size, depth * DEEPEN)
        ranked = ranked[:k]
        described = self.inner.titles.describe_rows([row for row, _, _ in ranked])
        return to_hits(ranked, [title for _, title in described], self.name)

    def search(self, query: str, k: int = 10, query_vector: np.ndarray | None = None) -> list[Hit]:
        query, k = check_query(query), check_k(k)
        seed_k = self.inner.config.seed_hits
        if not seed_k or not self.seeders:
            return self._hits(query, [], k)
        lists = [s.search(query, k=seed_k, query_vector=query_vector) for s in self.seeders]
        return self._hits(query, self.inner._seeds(lists), k)

    def search_seeded(self, query: str, k: int, seed_hits: Iterable[list[Hit]]) -> list[Hit]:
        query, k = check_query(query), check_k(k)
        return self._hits(query, self.inner._seeds([self.allowed.keep(h) for h in seed_hits]), k)

    def batch_search(self, queries: Sequence[str], k: int = 10,
                     query_vectors: np.ndarray | None = None) -> list[list[Hit]]:
        vecs = list(query_vectors) if query_vectors is not None else [None] * len(queries)
        return [self.search(q, k, query_vector=v) for q, v in zip(queries, vecs, strict=True)]


class Deepened:
    """Any retriever searched deeper (k·4, k·16, … up to the index size) until k allowed hits are found."""

    def __init__(self, inner: Retriever, allowed: AllowedRows, size: int) -> None:
        self.inner, self.allowed, self.name, self.size = inner, allowed, inner.name, size

    def search(self, query: str, k: int = 10, query_vector: np.ndarray | None = None) -> list[Hit]:
        check_k(k)
        depth = k
        while True:
            hits = self.inner.search(query, depth, query_vector)
            kept = self.allowed.keep(hits)
            if len(kept) >= k or len(hits) < depth or depth >= self.size:
                break
            depth = min(self.size, depth * DEEPEN)
        return [Hit(id=h.id, score=h.score, rank=i + 1, title=h.title, retriever=h.retriever, row=h.row)
                for i, h in enumerate(kept[:k])]

    def batch_search(self, queries: Sequence[str], k: int = 10,
                     query_vectors: np.ndarray | None = None) -> list[list[Hit]]:
        vecs = list(query_vectors) if query_vectors is not None else [None] * len(queries)
        return [self.search(q, k, query_vector=v) for q, v in zip(queries, vecs, strict=True)]


@runtime_checkable
class SearchesWithin(Protocol):
    """A retriever that ranks within given rows itself (the PostgreSQL store's BM25 and dense)."""

    name: str

    def search_within(self, query: str, k: int, rows: np.ndarray,
                      query_vector: np.ndarray | None = None, total: int | None = None) -> list[Hit]: ...


class Within:
    """A `SearchesWithin` retriever restricted to the allowed rows."""

    def __init__(self, inner: SearchesWithin, allowed: AllowedRows) -> None:
        self.inner, self.allowed, self.name = inner, allowed, inner.name

    def search(self, query: str, k: int = 10, query_vector: np.ndarray | None = None) -> list[Hit]:
        return self.inner.search_within(query, k, self.allowed.rows, query_vector, total=self.allowed.total)

    def batch_search(self, queries: Sequence[str], k: int = 10,
                     query_vectors: np.ndarray | None = None) -> list[list[Hit]]:
        vecs = list(query_vectors) if query_vectors is not None else [None] * len(queries)
        return [self.search(q, k, query_vector=v) for q, v in zip(queries, vecs, strict=True)]


def ranking_within(allowed: AllowedRows, retriever: Retriever) -> Retriever:
    """`retriever` ranking within `allowed` (made once per retriever object and allowed rows)."""
    return allowed.derived(retriever, lambda inner: filtered(inner, allowed, max(1, allowed.total)))


def filtered(retriever: Retriever, allowed: AllowedRows, size: int) -> Retriever:
    """`retriever` ranking within `allowed` (`size`: the passages in the index, the deepest search)."""
    if isinstance(retriever, SearchesWithin):
        return Within(retriever, allowed)
    if isinstance(retriever, BM25Retriever):
        return FilteredBM25(retriever, allowed)
    if isinstance(retriever, DenseRetriever):
        return FilteredDense(retriever, allowed)
    if isinstance(retriever, GraphRetriever):
        return FilteredGraph(retriever, allowed, [filtered(s, allowed, size) for s in retriever.seeders], size)
    return Deepened(retriever, allowed, size)


_SCOPE: ContextVar[AllowedRows | None] = ContextVar("amsrag_filter_scope", default=None)


@contextmanager
def scope(allowed: AllowedRows | None) -> Iterator[None]:
    """Inside the block, `scoped_retriever` in this thread (and context) ranks within `allowed` (None: no filter)."""
    token = _SCOPE.set(allowed)
    try:
        yield
    finally:
        _SCOPE.reset(token)


def current_scope() -> AllowedRows | None:
    """The rows the current call's filter allows (None: no filter in force)."""
    return _SCOPE.get()

