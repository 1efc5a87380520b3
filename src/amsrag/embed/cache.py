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
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

DEFAULT_ITEMS = 50_000  # vectors kept (~77 MB of float32 384-d)


class CachedEncoder:
    """An `Encoder` that remembers `encode` results by text (LRU, thread-safe). Same vectors as the inner
    encoder up to the float noise of batch composition."""

    def __init__(self, inner, max_items: int = DEFAULT_ITEMS) -> None:
        if max_items < 1:
            raise ValueError(f"max_items must be >= 1, got {max_items}")
        self.inner = inner
        self.dim: int = inner.dim
        self.max_items = max_items
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        self._new: list[str] = []  # texts embedded since the last `take_new`
        self.hits = 0
        self.misses = 0

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    def __len__(self) -> int:
        return len(self._cache)

    def encode(self, texts: Sequence[str], progress: Callable[[int], None] | None = None) -> np.ndarray:
        if len(texts) == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            missing = [t for t in dict.fromkeys(texts) if t not in self._cache]
        fresh = dict(zip(missing, self.inner.encode(missing), strict=True)) if missing else {}
        with self._lock:
            self.misses += len(missing)
            self.hits += len(texts) - len(missing)
            self._new += missing
            out = np.stack([fresh[t] if t in fresh else self._cache[t] for t in texts])
            self._cache.update(fresh)
            for t in texts:
                if t in self._cache:
                    self._cache.move_to_end(t)
            while len(self._cache) > self.max_items:
                self._cache.popitem(last=False)
        if progress is not None:
            progress(len(texts))
        return out

    def encode_query(self, text: str) -> np.ndarray:
        return self.inner.encode_query(text)

    def take_new(self) -> tuple[list[str], np.ndarray]:
        """The texts embedded since the last call (still cached) and their vectors; another process's
        cache can `add` them."""
        with self._lock:
            texts = [t for t in dict.fromkeys(self._new) if t in self._cache]
            self._new = []
            vectors = np.stack([self._cache[t] for t in texts]) if texts else np.zeros((0, self.dim), np.float32)
        return texts, vectors

    def add(self, texts: Sequence[str], vectors: np.ndarray) -> None:
        """Vectors computed elsewhere (same model) for these texts."""
        if len(texts) != len(vectors):
            raise ValueError(f"{len(texts)} texts but {len(vectors)} vectors")
        with self._lock:
            for text, vector in zip(texts, vectors, strict=True):
                self._cache[text] = np.asarray(vector, dtype=np.float32)
                self._cache.move_to_end(text)
            while len(self._cache) > self.max_items:
                self._cache.popitem(last=False)

    # ------------------------------------------------------------ persistence (benchmark reruns)
    def load(self, path: Path) -> int:
        """Add the vectors saved at `path` (when they are of this model); returns how many were added."""
        if not path.is_file():
            return 0
        with np.load(path, allow_pickle=False) as z:
            if str(z["model_id"]) != self.model_id:
                return 0
            items = list(zip(z["texts"].tolist(), z["vectors"], strict=True))
        with self._lock:
            for text, vector in items[-self.max_items:]:
                self._cache.setdefault(text, vector)
        return len(items)

    def save(self, path: Path) -> None:
        """Write the cache (texts, vectors, model id) atomically."""
        with self._lock:
            texts = list(self._cache)
            vectors = np.stack([self._cache[t] for t in texts]) if texts else np.zeros((0, self.dim), np.float32)
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
