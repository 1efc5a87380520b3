"""The entity-graph retriever: seeds from other retrievers' top hits, then ranks by local personalized
PageRank over a graph (`amsrag.indexes.entity_graph.EntityGraph`, or the PostgreSQL one)."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Generic, TypeVar

import numpy as np

from amsrag.config import GraphConfig
from amsrag.indexes.query_checks import check_k, check_query
from amsrag.retrieve.base import GraphRanker, Retriever, RowLookup, to_hits
from amsrag.types import Hit

G = TypeVar("G", bound=GraphRanker)


_SEED_POOL: ThreadPoolExecutor | None = None
_SEED_POOL_LOCK = threading.Lock()


def seed_pool() -> ThreadPoolExecutor:
    """The threads that run graph seeders beside the calling thread, shared by every graph retriever (retrievers
    are made per index generation; a pool each would leave idle threads behind every write)."""
    global _SEED_POOL
    with _SEED_POOL_LOCK:
        if _SEED_POOL is None:
            _SEED_POOL = ThreadPoolExecutor(max_workers=8, thread_name_prefix="amsrag-graph-seed")
        return _SEED_POOL


class GraphRetriever(Generic[G]):
    """The entity-graph retriever: seeds from other retrievers' top hits, ranks by local PPR over
    `graph` (the embedded `EntityGraph` or the PostgreSQL one)."""

    name = "graph"

    def __init__(self, graph: G, titles: RowLookup, seeders: Sequence[Retriever], config: GraphConfig) -> None:
        self.graph = graph.with_config(config)
        self.titles = titles
        self.seeders = list(seeders)
        self.config = config

    def _seeds(self, hit_lists: Iterable[list[Hit]]) -> list[tuple[int, float]]:
        """Seed passages: each seeder's top `seed_hits` hits weighted by reciprocal rank, summed."""
        weights: dict[int, float] = {}
        for hits in hit_lists:
            for position, hit in enumerate(hits[: self.config.seed_hits]):
                if hit.row >= 0:
                    weights[hit.row] = weights.get(hit.row, 0.0) + 1.0 / (position + 1)
        return sorted(weights.items())

    def _hits(self, query: str, seeds: list[tuple[int, float]], k: int) -> list[Hit]:
        ranked = self.graph.rank(query, seeds, k)
        described = self.titles.describe_rows([row for row, _, _ in ranked])
        return to_hits(ranked, [title for _, title in described], self.name)

    def seed_rows(self, query: str, query_vector: np.ndarray | None = None) -> list[tuple[int, float]]:
        """The weighted seed passages `search` would walk from (the seeders' top hits). The seeders run at
        once: the first in this thread, the others on a shared pool (on PostgreSQL the dense seeding is a
        round trip that BM25, ranked in-process, need not wait for)."""
        if not self.config.seed_hits or not self.seeders:
            return []
        k = self.config.seed_hits
        first, *others = self.seeders
        pending = [seed_pool().submit(s.search, query, k=k, query_vector=query_vector) for s in others]
        hit_lists = [first.search(query, k=k, query_vector=query_vector), *(f.result() for f in pending)]
        return self._seeds(hit_lists)

    def search(self, query: str, k: int = 10, query_vector: np.ndarray | None = None) -> list[Hit]:
        query, k = check_query(query), check_k(k)
        return self._hits(query, self.seed_rows(query, query_vector), k)

    def search_seeded(self, query: str, k: int, seed_hits: Iterable[list[Hit]]) -> list[Hit]:
        """`search` with the seeders' hit lists given (the pipeline has just run them): no second run."""
        query, k = check_query(query), check_k(k)
        return self._hits(query, self._seeds(seed_hits), k)

    def batch_search(
        self, queries: Sequence[str], k: int = 10, query_vectors: np.ndarray | None = None
    ) -> list[list[Hit]]:
        cleaned, k = [check_query(q) for q in queries], check_k(k)
        per_seeder = (
            [s.batch_search(cleaned, k=self.config.seed_hits, query_vectors=query_vectors) for s in self.seeders]
            if self.config.seed_hits and cleaned
            else []
        )
        return [self._hits(q, self._seeds(lists[i] for lists in per_seeder), k) for i, q in enumerate(cleaned)]
