"""The vector index a store keeps: stored MiniLM passage vectors, exact search for small corpora, HNSW above
(searching it for a query is `amsrag.retrieve.dense.DenseRetriever`).

Vectors are computed once per passage and stored; adding passages appends, deleting drops
rows, nothing already stored is re-embedded. The large files (vectors, HNSW graph) are written only
when the passages added since their last write outgrow a small exactly-searched delta. HNSW
candidates are re-scored exactly, so scores are true cosines and ties break by passage id whichever
search ran.
"""

from __future__ import annotations

import hashlib
import json
import logging
import mmap
import os
import time
from collections.abc import Sequence
from pathlib import Path

import hnswlib
import numpy as np

from amsrag.config import DenseConfig
from amsrag.errors import IndexCorruptError

log = logging.getLogger(__name__)

_REBUILD_DELETED_SHARE = 0.2  # rebuild HNSW once this share of its elements are tombstones
# Passages added since the HNSW graph was last written are searched exactly beside it: this many at
# most (and at most a fiftieth of the graph's size, from 1,000) before they are inserted and the graph saved.
DELTA_MAX = 20_000
FORMAT_VERSION = 2  # 1: rows.npy, vectors.npy, hnsw.bin rewritten on every change (still read)


_RELEASE_ROWS = 65_536  # a gather this large reads the mapped base in blocks, releasing each block's pages


def map_npy(path: Path) -> np.ndarray:
    """A read-only view of an .npy file through a private memory map (like `np.load(mmap_mode="r")`),
    whose pages `release_pages` can drop from this process's resident memory."""
    with open(path, "rb") as fh:
        major, _ = np.lib.format.read_magic(fh)
        header = np.lib.format.read_array_header_1_0 if major == 1 else np.lib.format.read_array_header_2_0
        shape, fortran, dtype = header(fh)
        offset = fh.tell()
        if fortran:
            raise IndexCorruptError(f"{path}: a Fortran-ordered array (rebuild the index)")
        size = offset + int(np.prod(shape)) * dtype.itemsize
        if os.fstat(fh.fileno()).st_size < size:
            raise IndexCorruptError(f"{path} is shorter than its header says (rebuild the index)")
        if size == offset:
            return np.zeros(shape, dtype=dtype)
        buf = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    return np.frombuffer(buf, dtype=dtype, count=int(np.prod(shape)), offset=offset).reshape(shape)


def mapping_of(array: np.ndarray) -> mmap.mmap | None:
    """The memory map under an array `map_npy` made (None for any other array)."""
    owner = array.base
    while isinstance(owner, np.ndarray):
        owner = owner.base
    if isinstance(owner, memoryview):
        owner = owner.obj
    return owner if isinstance(owner, mmap.mmap) else None


def release_pages(array: np.ndarray, first: int, last: int) -> None:
    """Drop the resident pages holding rows first..last of an array `map_npy` made (a no-op for any
    other array): clean file pages, read again from the page cache if touched again. A writer
    gathering a million-row base into a new one would otherwise hold both (1.5 GB each at 1M)."""
    owner = mapping_of(array)
    if owner is None or last < first:
        return
    start_ptr = array.__array_interface__["data"][0]
    base_ptr = np.frombuffer(owner, dtype=np.uint8, count=1).__array_interface__["data"][0]
    row = array.strides[0]
    lo = start_ptr - base_ptr + first * row
    hi = start_ptr - base_ptr + (last + 1) * row
    lo -= lo % mmap.PAGESIZE
    hi = min(len(owner), hi)
    if hi > lo:
        owner.madvise(mmap.MADV_DONTNEED, lo, hi - lo)


def _delta_limit(base: int) -> int:
    return min(DELTA_MAX, max(1000, base // 50))


class VectorIndex:
    """Passage vectors in two parts: a *base* (rows, vectors and their HNSW graph, written once and
    hard-linked into later generations) and a small *delta* of passages added since, searched
    exactly; deleted base rows are dead marks. When the delta outgrows its limit it is inserted into
    the graph and a new base written, so a change rarely rewrites the large files. Below
    `hnsw_min_size` passages there is no graph and every search is exact."""

    def __init__(self, config: DenseConfig, dim: int, rows: np.ndarray, vectors: np.ndarray,
                 hnsw: hnswlib.Index | None = None, delta_rows: np.ndarray | None = None,
                 delta_vectors: np.ndarray | None = None, dead: np.ndarray | None = None,
                 base_name: str | None = None) -> None:
        self.config = config
        self.dim = dim
        self.base_rows = np.asarray(rows, dtype=np.int64)
        self.base_vectors = vectors
        self.hnsw = hnsw
        self.delta_rows = np.zeros(0, np.int64) if delta_rows is None else np.asarray(delta_rows, dtype=np.int64)
        self.delta_vectors = (np.zeros((0, dim), np.float32) if delta_vectors is None
                              else np.asarray(delta_vectors, dtype=np.float32).reshape(-1, dim))
        self.dead = np.zeros(0, np.int64) if dead is None else np.asarray(dead, dtype=np.int64)
        self.base_name = base_name  # the file stem of a base already on disk (None: write it)
        live_base = self.base_rows if not len(self.dead) else self.base_rows[~np.isin(self.base_rows, self.dead)]
        self.rows = np.sort(np.concatenate([live_base, self.delta_rows]))

    @classmethod
    def empty(cls, config: DenseConfig, dim: int) -> VectorIndex:
        return cls(config, dim, np.zeros(0, np.int64), np.zeros((0, dim), np.float32))

    @property
    def kind(self) -> str:
        return "hnsw" if self.hnsw is not None else "exact"

    @property
    def vectors(self) -> np.ndarray:
        """Every live vector, aligned with `rows` (a copy: for exact search and checks)."""
        return self.vectors_for_rows(self.rows)

    def updated(self, added_rows: Sequence[int], added_vectors: np.ndarray,
                removed_rows: Sequence[int]) -> VectorIndex:
        added_vectors = np.asarray(added_vectors, dtype=np.float32).reshape(-1, self.dim)
        added = np.asarray(added_rows, dtype=np.int64)
        removed = np.asarray(removed_rows, dtype=np.int64)
        keep = ~np.isin(self.delta_rows, removed)
        delta_rows = np.concatenate([self.delta_rows[keep], added])
        delta_vectors = np.concatenate([self.delta_vectors[keep], added_vectors])
        order = np.argsort(delta_rows, kind="stable")
        delta_rows, delta_vectors = delta_rows[order], delta_vectors[order]
        dead = np.union1d(self.dead, removed[np.isin(removed, self.base_rows)]).astype(np.int64)
        n_live = len(self.base_rows) - len(dead) + len(delta_rows)
        h = self.hnsw
        if n_live < max(1, self.config.hnsw_min_size):
            h = None
        tombstones = (h.element_count - len(self.base_rows) + len(dead)) if h is not None else 0
        if h is None or tombstones > _REBUILD_DELETED_SHARE * max(1, n_live):
            rows = np.sort(np.concatenate([self.base_rows[~np.isin(self.base_rows, dead)], delta_rows]))
            vectors = np.ascontiguousarray(self._gather(rows, delta_rows, delta_vectors))
            hnsw = self._build_hnsw(rows, vectors) if n_live >= max(1, self.config.hnsw_min_size) else None
            return VectorIndex(self.config, self.dim, rows, vectors, hnsw)
        for r in removed[np.isin(removed, self.base_rows)].tolist():
            if r not in self.dead:
                h.mark_deleted(int(r))
        if len(delta_rows) <= _delta_limit(len(self.base_rows)):
            return VectorIndex(self.config, self.dim, self.base_rows, self.base_vectors, h, delta_rows, delta_vectors,
                               dead, self.base_name)
        h.resize_index(h.element_count + len(delta_rows))
        h.add_items(delta_vectors, delta_rows, num_threads=1)
        rows = np.sort(np.concatenate([self.base_rows[~np.isin(self.base_rows, dead)], delta_rows]))
        return VectorIndex(self.config, self.dim, rows, np.ascontiguousarray(self._gather(rows, delta_rows,
                                                                                           delta_vectors)), h)

    def _build_hnsw(self, rows: np.ndarray, vectors: np.ndarray) -> hnswlib.Index:
        c = self.config
        h = hnswlib.Index(space="ip", dim=self.dim)
        h.init_index(max_elements=len(rows), ef_construction=c.hnsw_ef_construction, M=c.hnsw_m,
                     random_seed=c.seed)
        # One thread: multi-threaded insertion order makes the graph, and so results, vary run to run.
        h.add_items(vectors, rows, num_threads=1)
        h.set_ef(c.hnsw_ef_search)
        return h

    # ---- storage ------------------------------------------------------------------------------
    def save(self, directory: Path, previous: Path | None = None) -> None:
        """Write into `directory`; a base already saved in `previous` is hard-linked from there."""
        name = self.base_name
        if name is None or previous is None or not _link_base(previous, directory, name, self.hnsw is not None):
            digest = hashlib.blake2b(np.ascontiguousarray(self.base_rows).tobytes(), digest_size=8)
            digest.update(np.ascontiguousarray(self.base_vectors[: min(len(self.base_rows), 64)]).tobytes())
            name = f"base-{digest.hexdigest()}-{len(self.base_rows)}"
            np.save(directory / f"{name}.rows.npy", self.base_rows)
            np.save(directory / f"{name}.vectors.npy", np.asarray(self.base_vectors))
            if self.hnsw is not None:
                self.hnsw.save_index(str(directory / f"{name}.hnsw.bin"))
            self.base_name = name
        np.save(directory / "delta.rows.npy", self.delta_rows)
        np.save(directory / "delta.vectors.npy", self.delta_vectors)
        np.save(directory / "dead.npy", self.dead)
        meta = {"format": FORMAT_VERSION, "base": name, "hnsw": self.hnsw is not None}
        (directory / "dense.json").write_text(json.dumps(meta), encoding="utf-8")

    def map_base(self, directory: Path) -> None:
        """Read the base vectors from their file in `directory` (memory-mapped) instead of holding the
        in-memory array a rebuild made: after a write, a long-running writer keeps one copy, the page cache's."""
        path = directory / f"{self.base_name}.vectors.npy"
        if self.base_name is not None and path.is_file():
            self.base_vectors = map_npy(path)

    @classmethod
    def load(cls, directory: Path, config: DenseConfig, dim: int) -> VectorIndex:
        if not (directory / "dense.json").exists():  # format 1
            rows = np.load(directory / "rows.npy")
            vectors = np.load(directory / "vectors.npy", mmap_mode="r")
            index = cls(config, dim, rows, vectors)
            index.hnsw = index._load_hnsw(directory / "hnsw.bin")
            return index
        meta = json.loads((directory / "dense.json").read_text(encoding="utf-8"))
        name = meta["base"]
        index = cls(config, dim, np.load(directory / f"{name}.rows.npy"), map_npy(directory / f"{name}.vectors.npy"),
                    None, np.load(directory / "delta.rows.npy"), np.load(directory / "delta.vectors.npy"),
                    np.load(directory / "dead.npy"), name)
        hnsw = index._load_hnsw(directory / f"{name}.hnsw.bin") if meta["hnsw"] else None
        if hnsw is not None:
            index.hnsw = hnsw
            for r in index.dead.tolist():
                try:
                    hnsw.mark_deleted(int(r))
                except RuntimeError as exc:  # a graph rebuilt at an earlier load was saved with its deletions
                    if "already deleted" not in str(exc):
                        raise
        return index

    def _load_hnsw(self, path: Path) -> hnswlib.Index | None:
        """The saved HNSW graph of the base; rebuilt from the base's stored vectors when this build of hnswlib cannot
        read the file (one written by another build: hnswlib's and chroma-hnswlib's files differ by a field), the
        same graph as the same seed and insertion order give. A rebuilt base is saved again at the next write."""
        if not path.exists():
            return None
        hnsw = hnswlib.Index(space="ip", dim=self.dim)
        try:
            hnsw.load_index(str(path), max_elements=0, allow_replace_deleted=False)
        except RuntimeError as exc:
            t = time.perf_counter()
            hnsw = self._build_hnsw(self.base_rows, np.ascontiguousarray(self.base_vectors))
            self.base_name = None  # the next save writes the base, and its graph, afresh
            log.warning("%s: the HNSW graph cannot be read by this hnswlib (%s); rebuilt from the %d stored vectors "
                        "in %.1f s; the next write to the index saves it again", path, exc, len(self.base_rows),
                        time.perf_counter() - t)
            return hnsw
        hnsw.set_ef(self.config.hnsw_ef_search)
        return hnsw

    # ---- reading ------------------------------------------------------------------------------
    def _gather(self, rows: np.ndarray, delta_rows: np.ndarray, delta_vectors: np.ndarray) -> np.ndarray:
        """Vectors of store rows `rows` (every one in the base or the given delta)."""
        out = np.empty((len(rows), self.dim), dtype=np.float32)
        in_delta = np.zeros(len(rows), dtype=bool)
        if len(delta_rows):
            pos = np.minimum(np.searchsorted(delta_rows, rows), len(delta_rows) - 1)
            in_delta = delta_rows[pos] == rows
            out[in_delta] = delta_vectors[pos[in_delta]]
        if not in_delta.all():
            where = np.flatnonzero(~in_delta)
            want = rows[where]
            pos = np.searchsorted(self.base_rows, want)
            if np.any(pos >= len(self.base_rows)) or np.any(self.base_rows[np.minimum(pos, len(self.base_rows) - 1)]
                                                            != want):
                raise KeyError(f"rows not in the dense index: {want[:5].tolist()}")
            order = np.argsort(pos, kind="stable")  # read the memory-mapped base in file order, copy once
            if len(order) <= _RELEASE_ROWS:
                out[where[order]] = self.base_vectors[pos[order]]
                return out
            for i in range(0, len(order), _RELEASE_ROWS):
                block = order[i : i + _RELEASE_ROWS]
                out[where[block]] = self.base_vectors[pos[block]]
                release_pages(self.base_vectors, int(pos[block[0]]), int(pos[block[-1]]))
        return out

    def vectors_for_rows(self, rows: Sequence[int] | np.ndarray) -> np.ndarray:
        wanted = np.asarray(rows, dtype=np.int64).reshape(-1)
        if len(self.dead) and np.any(np.isin(wanted, self.dead)):
            raise KeyError(f"rows deleted from the dense index: {wanted[np.isin(wanted, self.dead)][:5].tolist()}")
        return self._gather(wanted, self.delta_rows, self.delta_vectors)

    def scored_candidates(self, qvec: np.ndarray, k: int, exact: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """(rows, cosine scores) of candidate neighbours: every passage (exact), or HNSW's k + margin
        from the base beside every passage of the delta."""
        if self.hnsw is None or exact:
            # straight over the stored arrays (no copy of every vector): rows come base first, then delta
            base = np.asarray(self.base_vectors @ qvec, dtype=np.float32)
            rows = self.base_rows
            if len(self.dead):
                live = ~np.isin(self.base_rows, self.dead)
                rows, base = rows[live], base[live]
            return (np.concatenate([rows, self.delta_rows]),
                    np.concatenate([base, np.asarray(self.delta_vectors @ qvec, dtype=np.float32)]))
        labels = self._hnsw_labels(qvec, k)
        rows = np.concatenate([labels, self.delta_rows])
        vectors = np.concatenate([self._gather(labels, self.delta_rows[:0], self.delta_vectors[:0]),
                                  self.delta_vectors])
        return rows, np.asarray(vectors @ qvec, dtype=np.float32)

    def _hnsw_labels(self, qvec: np.ndarray, k: int) -> np.ndarray:
        assert self.hnsw is not None
        n = len(self.base_rows) - len(self.dead)
        want = min(n, max(k + 10, k * 2))
        if want <= 0:
            return np.zeros(0, np.int64)
        self.hnsw.set_ef(max(self.config.hnsw_ef_search, want))
        labels, _ = self.hnsw.knn_query(qvec.reshape(1, -1), k=want, num_threads=1)
        found = np.asarray(labels[0], dtype=np.int64)
        # labels this generation does not hold (a newer writer's insertions into a shared graph) are skipped
        pos = np.minimum(np.searchsorted(self.base_rows, found), len(self.base_rows) - 1)
        found = found[self.base_rows[pos] == found]
        return found[~np.isin(found, self.dead)] if len(self.dead) else found


def _link_base(previous: Path, directory: Path, name: str, with_hnsw: bool) -> bool:
    files = [f"{name}.rows.npy", f"{name}.vectors.npy", *([f"{name}.hnsw.bin"] if with_hnsw else [])]
    try:
        for f in files:
            os.link(previous / f, directory / f)
    except OSError:
        for f in files:
            (directory / f).unlink(missing_ok=True)
        return False
    return True
