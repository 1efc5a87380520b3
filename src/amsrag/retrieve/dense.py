"""Dense retrieval: the dense retriever over a store's vector index (`amsrag.indexes.vectors`)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from amsrag.embed.encoder import Encoder
from amsrag.errors import InputError
from amsrag.indexes.query_checks import check_k, check_query
from amsrag.indexes.vectors import VectorIndex
from amsrag.retrieve.base import RowLookup
from amsrag.topk import topk_indices
from amsrag.types import Hit


def check_query_vector(vector: np.ndarray | None, dim: int) -> np.ndarray | None:
    if vector is None:
        return None
    v = np.asarray(vector, dtype=np.float32).reshape(-1)
    if v.shape[0] != dim or not np.all(np.isfinite(v)):
        raise InputError(f"query_vector must be {dim} finite numbers, got shape {np.shape(vector)}")
    return v


class DenseRetriever:
    name = "dense"

    def __init__(self, index: VectorIndex, encoder: Encoder, lookup: RowLookup) -> None:
        self.index = index
        self.encoder = encoder
        self.lookup = lookup

    def search(self, query: str, k: int = 10, query_vector: np.ndarray | None = None,
               exact: bool = False) -> list[Hit]:
        check_query(query)
        check_k(k)
        qvec = check_query_vector(query_vector, self.index.dim)
        if qvec is None:
            qvec = self.encoder.encode_query(query)
        if not len(self.index.rows):
            return []
        rows, scores = self.index.scored_candidates(qvec, k, exact=exact)
        best = topk_indices(scores, k, lambda i: self.lookup.describe_rows([int(rows[i])])[0][0])
        info = self.lookup.describe_rows([int(rows[i]) for i in best])
        return [Hit(id=pid, score=float(scores[i]), rank=n + 1, title=title, retriever=self.name, row=int(rows[i]))
                for n, (i, (pid, title)) in enumerate(zip(best, info, strict=True))]

    def batch_search(self, queries: Sequence[str], k: int = 10,
                     query_vectors: np.ndarray | None = None) -> list[list[Hit]]:
        for q in queries:
            check_query(q)
        vecs = self.encoder.encode(list(queries)) if query_vectors is None else np.asarray(query_vectors)
        if len(vecs) != len(queries):
            raise InputError(f"{len(queries)} queries but {len(vecs)} query vectors")
        return [self.search(q, k, query_vector=v) for q, v in zip(queries, vecs, strict=True)]
