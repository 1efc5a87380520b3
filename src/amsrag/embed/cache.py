"""One sentence-vector cache per encoder, shared by every stage that embeds evidence sentences.

The corrective step's retrieval evaluator and the extractive reader both embed "title. sentence" for the
passages a query retrieved; the same passages come back across queries, systems and retries. Both wrap the
index's encoder with `shared_cache(encoder)`, which returns one `CachedEncoder` per encoder object, so a
sentence is embedded once per process. Query embeddings are not cached: they are timed as retrieval.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Generic, TypeVar

import numpy as np

DEFAULT_ITEMS = 50_000  # vectors kept (~77 MB of float32 384-d)
V = TypeVar("V")


class BatchLRU(Generic[V]):
    """A thread-safe LRU keyed by text whose misses are computed together, in one call made outside the lock
    (an encoder batch, a spaCy pipe)."""

    def __init__(self, max_items: int) -> None:
        if max_items < 1:
            raise ValueError(f"max_items must be >= 1, got {max_items}")
        self.max_items = max_items
        self._items: OrderedDict[str, V] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._items)

    def lookup(self, keys: Sequence[str], compute: Callable[[list[str]], Sequence[V]]) -> list[V]:
        """The values of `keys` in order; `compute(missing)` makes those not cached."""
        with self._lock:
            missing = [k for k in dict.fromkeys(keys) if k not in self._items]
        fresh = dict(zip(missing, compute(missing), strict=True)) if missing else {}
        with self._lock:
            self.misses += len(missing)
            self.hits += len(keys) - len(missing)
            out = [fresh[k] if k in fresh else self._items[k] for k in keys]
            self._put(fresh.items())
            for k in keys:
                if k in self._items:
                    self._items.move_to_end(k)
        return out

    def put_many(self, items: Iterable[tuple[str, V]], replace: bool = True) -> None:
        with self._lock:
            self._put(items if replace else ((k, v) for k, v in items if k not in self._items))

    def _put(self, items: Iterable[tuple[str, V]]) -> None:
        for key, value in items:
            self._items[key] = value
            self._items.move_to_end(key)
        while len(self._items) > self.max_items:
            self._items.popitem(last=False)

    def snapshot(self, keys: Iterable[str] | None = None) -> list[tuple[str, V]]:
        """(key, value) of `keys` still cached (default: all), without touching the LRU order."""
        with self._lock:
            wanted = self._items if keys is None else dict.fromkeys(keys)
            return [(k, self._items[k]) for k in wanted if k in self._items]


class CachedEncoder:
    """An `Encoder` that remembers `encode` results by text (LRU, thread-safe). Same vectors as the inner
    encoder up to the float noise of batch composition."""

    def __init__(self, inner, max_items: int = DEFAULT_ITEMS) -> None:
        self.inner = inner
        self.dim: int = inner.dim
        self._vectors: BatchLRU[np.ndarray] = BatchLRU(max_items)
        self._new: list[str] = []  # texts embedded since the last `take_new`
        self._new_lock = threading.Lock()

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    @property
    def max_items(self) -> int:
        return self._vectors.max_items

    @property
    def hits(self) -> int:
        return self._vectors.hits

    @property
    def misses(self) -> int:
        return self._vectors.misses

    def __len__(self) -> int:
        return len(self._vectors)

    def _embed(self, texts: list[str]) -> np.ndarray:
        with self._new_lock:
            self._new += texts
        return self.inner.encode(texts)

    def encode(self, texts: Sequence[str], progress: Callable[[int], None] | None = None) -> np.ndarray:
        if len(texts) == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        out = np.stack(self._vectors.lookup(texts, lambda batch: list(self._embed(batch))))
        if progress is not None:
            progress(len(texts))
        return out

    def encode_query(self, text: str) -> np.ndarray:
        return self.inner.encode_query(text)

    def take_new(self) -> tuple[list[str], np.ndarray]:
        """The texts embedded since the last call (still cached) and their vectors; another process's
        cache can `add` them."""
        with self._new_lock:
            new, self._new = self._new, []
        return self._arrays(self._vectors.snapshot(new))

    def add(self, texts: Sequence[str], vectors: np.ndarray) -> None:
        """Vectors computed elsewhere (same model) for these texts."""
        if len(texts) != len(vectors):
            raise ValueError(f"{len(texts)} texts but {len(vectors)} vectors")
        self._vectors.put_many((t, np.asarray(v, dtype=np.float32)) for t, v in zip(texts, vectors, strict=True))

    def _arrays(self, items: list[tuple[str, np.ndarray]]) -> tuple[list[str], np.ndarray]:
        texts = [t for t, _ in items]
        vectors = np.stack([v for _, v in items]) if items else np.zeros((0, self.dim), np.float32)
        return texts, vectors

    # ------------------------------------------------------------ persistence (benchmark reruns)
    def load(self, path: Path) -> int:
        """Add the vectors saved at `path` (when they are of this model); returns how many were added."""
        if not path.is_file():
            return 0
        with np.load(path, allow_pickle=False) as z:
            if str(z["model_id"]) != self.model_id:
                return 0
            items = list(zip(z["texts"].tolist(), z["vectors"], strict=True))
        self._vectors.put_many(items[-self.max_items:], replace=False)
        return len(items)

    def save(self, path: Path) -> None:
        """Write the cache (texts, vectors, model id) atomically."""
        texts, vectors = self._arrays(self._vectors.snapshot())
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.stem + ".tmp.npz")
        np.savez(tmp, texts=np.asarray(texts), vectors=vectors, model_id=np.asarray(self.model_id))
        tmp.replace(path)


_SHARED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_SHARED_LOCK = threading.Lock()


def shared_cache(encoder) -> CachedEncoder:
    """The process's sentence cache for `encoder` (itself when it already is one)."""
    if isinstance(encoder, CachedEncoder):
        return encoder
    with _SHARED_LOCK:
        try:
            cached = _SHARED.get(encoder)
            if cached is None:
                cached = _SHARED[encoder] = CachedEncoder(encoder)
        except TypeError:  # an encoder that cannot be weakly referenced: a cache of its own
            cached = CachedEncoder(encoder)
        return cached
