"""The Protocols of retrieval: `Retriever` (every retriever), `RowLookup` (what retrievers ask the
store about rows) and `GraphRanker` (what the graph retriever needs from an entity graph, embedded
or PostgreSQL), and helpers they share."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, Self, runtime_checkable

import numpy as np

from amsrag.config import GraphConfig
from amsrag.types import Hit


@runtime_checkable
class Retriever(Protocol):
    """Ranked passages for a query.

    `query_vector` is the query's embedding when the caller already has it (the pipeline computes
    it once and shares it); retrievers that need it and do not get it compute it themselves.
    Hits are sorted by score descending, ties by passage id, ranks count from 1.
    """

    name: str

    def search(self, query: str, k: int = 10, query_vector: np.ndarray | None = None) -> list[Hit]: ...

    def batch_search(
        self, queries: Sequence[str], k: int = 10, query_vectors: np.ndarray | None = None
    ) -> list[list[Hit]]: ...


class RowLookup(Protocol):
    """Maps internal store rows to (passage id, title)."""

    def describe_rows(self, rows: Sequence[int]) -> list[tuple[str, str]]: ...


class GraphRanker(Protocol):
    """An entity graph that ranks passages from a query's seeds (local personalized PageRank)."""

    def rank(self, query: str, seed_rows: Sequence[tuple[int, float]], k: int) -> list[tuple[int, float, str]]:
        """Top-k (row, score, passage id) from the query's entities and the weighted seed rows."""
        ...

    def with_config(self, config: GraphConfig) -> Self:
        """The same graph ranking with `config`'s query-time settings (structural ones stay)."""
        ...


def rank_rows(rows: np.ndarray, scores: np.ndarray, ids: Sequence[str], k: int) -> list[tuple[int, float, str]]:
    """Top-k (row, score, id), score descending, ties broken by passage id so results are deterministic."""
    order = sorted(range(len(rows)), key=lambda i: (-float(scores[i]), ids[i]))[:k]
    return [(int(rows[i]), float(scores[i]), ids[i]) for i in order]


def to_hits(ranked: Sequence[tuple[int, float, str]], titles: Sequence[str], retriever: str) -> list[Hit]:
    return [
        Hit(id=pid, score=score, rank=i + 1, title=title, retriever=retriever, row=row)
        for i, ((row, score, pid), title) in enumerate(zip(ranked, titles, strict=True))
    ]
