"""Dense retrieval: stored MiniLM passage vectors, exact search for small corpora, HNSW above.

Vectors are computed once per passage and stored; adding passages appends, deleting drops
rows, nothing already stored is re-embedded. HNSW candidates are re-scored exactly, so scores
are true cosines and ties break by passage id whichever search ran.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import hnswlib
import numpy as np

from amsrag.config import DenseConfig
from amsrag.embed.encoder import Encoder
from amsrag.errors import InputError
from amsrag.retrieve.base import RowLookup, check_k, check_query
from amsrag.retrieve.topk import topk_indices
from amsrag.types import Hit

_REBUILD_DELETED_SHARE = 0.2  # rebuild HNSW once this share of its elements are tombstones


class VectorIndex:
    def __init__(self, config: DenseConfig, dim: int, rows: np.ndarray, vectors: np.ndarray,
                 hnsw: hnswlib.Index | None = None) -> None:
        self.config = config
        self.dim = dim
        self.rows = rows
        self.vectors = vectors
        self.hnsw = hnsw
        self._pos = {int(r): i for i, r in enumerate(rows)}

    @classmethod
    def empty(cls, config: DenseConfig, dim: int) -> VectorIndex:
        return cls(config, dim, np.zeros(0, np.int64), np.zeros((0, dim), np.float32))

    @property
    def kind(self) -> str:
        return "hnsw" if self.hnsw is not None else "exact"

    def updated(self, added_rows: Sequence[int], added_vectors: np.ndarray,
                removed_rows: Sequence[int]) -> VectorIndex:
        added_vectors = np.asarray(added_vectors, dtype=np.float32).reshape(-1, self.dim)
        removed = np.asarray(removed_rows, dtype=np.int64)
        keep = ~np.isin(self.rows, removed)
        rows = np.concatenate([self.rows[keep], np.asarray(added_rows, dtype=np.int64)])
        vectors = np.concatenate([self.vectors[keep], added_vectors])
        order = np.argsort(rows, kind="stable")
        rows, vectors = rows[order], np.ascontiguousarray(vectors[order])
        hnsw = self._updated_hnsw(rows, vectors, added_rows, added_vectors, removed[np.isin(removed, self.rows)])
        return VectorIndex(self.config, self.dim, rows, vectors, hnsw)

    def _updated_hnsw(self, rows: np.ndarray, vectors: np.ndarray, added_rows: Sequence[int],
                      added_vectors: np.ndarray, removed: np.ndarray) -> hnswlib.Index | None:
        if len(rows) < max(1, self.config.hnsw_min_size):
            return None
        h = self.hnsw
        tombstones = (h.element_count - len(self.rows) + len(removed)) if h is not None else 0
        if h is None or tombstones > _REBUILD_DELETED_SHARE * max(1, len(rows)):
            return self._build_hnsw(rows, vectors)
        for r in removed:
            h.mark_deleted(int(r))
        if len(added_rows):
            h.resize_index(h.element_count + len(added_rows))
            h.add_items(added_vectors, np.asarray(added_rows, dtype=np.int64), num_threads=1)
        return h

    def _build_hnsw(self, rows: np.ndarray, vectors: np.ndarray) -> hnswlib.Index:
        c = self.config
        h = hnswlib.Index(space="ip", dim=self.dim)
        h.init_index(max_elements=len(rows), ef_construction=c.hnsw_ef_construction, M=c.hnsw_m,
                     random_seed=c.seed)
        # One thread: multi-threaded insertion order makes the graph, and so results, vary run to run.
        h.add_items(vectors, rows, num_threads=1)
        h.set_ef(c.hnsw_ef_search)
        return h

    def save(self, directory: Path) -> None:
        np.save(directory / "rows.npy", self.rows)
        np.save(directory / "vectors.npy", self.vectors)
        if self.hnsw is not None:
            self.hnsw.save_index(str(directory / "hnsw.bin"))

    @classmethod
    def load(cls, directory: Path, config: DenseConfig, dim: int) -> VectorIndex:
        rows = np.load(directory / "rows.npy")
        vectors = np.load(directory / "vectors.npy", mmap_mode="r")
        hnsw = None
        if (directory / "hnsw.bin").exists():
            hnsw = hnswlib.Index(space="ip", dim=dim)
            hnsw.load_index(str(directory / "hnsw.bin"), max_elements=0)
            hnsw.set_ef(config.hnsw_ef_search)
        return cls(config, dim, rows, vectors, hnsw)

    def vectors_for_rows(self, rows: Sequence[int]) -> np.ndarray:
        idx = [self._pos[int(r)] for r in rows]
        return np.asarray(self.vectors[idx], dtype=np.float32)

    def scored_candidates(self, qvec: np.ndarray, k: int, exact: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """(rows, cosine scores) of candidate neighbours: every passage (exact) or HNSW's k + margin."""
        if self.hnsw is None or exact:
            return self.rows, np.asarray(self.vectors @ qvec, dtype=np.float32)
        positions = self._hnsw_positions(qvec, k)
        return self.rows[positions], np.asarray(self.vectors[positions] @ qvec, dtype=np.float32)

    def _hnsw_positions(self, qvec: np.ndarray, k: int) -> np.ndarray:
        assert self.hnsw is not None
        n = len(self.rows)
        want = min(n, max(k + 10, k * 2))
        self.hnsw.set_ef(max(self.config.hnsw_ef_search, want))
        labels, _ = self.hnsw.knn_query(qvec.reshape(1, -1), k=want, num_threads=1)
        return np.fromiter((self._pos[int(r)] for r in labels[0]), dtype=np.int64, count=labels.shape[1])


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
