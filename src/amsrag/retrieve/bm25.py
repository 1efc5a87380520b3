"""Sparse retrieval: the BM25 retriever over a store's BM25 index (`amsrag.indexes.bm25`)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from amsrag.indexes.bm25 import BM25Index
from amsrag.indexes.query_checks import check_k, check_query
from amsrag.retrieve.base import RowLookup
from amsrag.topk import topk_indices
from amsrag.types import Hit


class BM25Retriever:
    name = "bm25"

    def __init__(self, index: BM25Index, lookup: RowLookup) -> None:
        self.index = index
        self.lookup = lookup

    def search(self, query: str, k: int = 10, query_vector: np.ndarray | None = None) -> list[Hit]:
        check_query(query)
        check_k(k)
        scores = self.index.scores(query)
        rows = self.index.rows
        best = topk_indices(scores, k, lambda i: self.lookup.describe_rows([int(rows[i])])[0][0], min_score=0.0)
        info = self.lookup.describe_rows([int(rows[i]) for i in best])
        return [Hit(id=pid, score=float(scores[i]), rank=n + 1, title=title, retriever=self.name, row=int(rows[i]))
                for n, (i, (pid, title)) in enumerate(zip(best, info, strict=True))]

    def batch_search(self, queries: Sequence[str], k: int = 10,
                     query_vectors: np.ndarray | None = None) -> list[list[Hit]]:
        return [self.search(q, k) for q in queries]

    def score_rows(self, query: str, rows: Sequence[int]) -> np.ndarray:
        """BM25 scores of the given store rows for `query` (see `BM25Index.score_rows`)."""
        return self.index.score_rows(query, rows)
