"""The store rows a metadata filter allows (`AllowedRows`), resolved by a store from its rows' facets; the
retrievers that rank within them are `amsrag.retrieve.filtered`."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

import numpy as np

from amsrag.filters import Where
from amsrag.types import Hit

S = TypeVar("S")
D = TypeVar("D")


@dataclass(frozen=True, eq=False)
class AllowedRows:
    """The store rows a filter allows (`rows`, ascending) out of `total` stored passages."""

    where: Where
    rows: np.ndarray
    total: int
    _masks: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = field(default_factory=dict, repr=False)
    _derived: dict[int, tuple[object, object]] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def resolve(cls, where: Where, facets: Iterable[Sequence[Any]]) -> AllowedRows:
        """The rows among `facets` (row, document key, metadata `source`, metadata `type`, and the document
        row's modification time and tags, as a list or a JSON array, None without a row) that `where` allows."""
        total = 0
        allowed: list[int] = []
        tag_sets: dict[Any, tuple[str, ...]] = {}  # a document's tags, read once per distinct value
        for row, doc_id, source, kind, modified, stored_tags in facets:
            total += 1
            tags: tuple[str, ...] = ()
            if where.tag and stored_tags is not None:
                key = stored_tags if isinstance(stored_tags, str) else tuple(stored_tags)
                if key not in tag_sets:
                    tag_sets[key] = tuple(json.loads(key)) if isinstance(key, str) else key
                tags = tag_sets[key]
            if where.allows(doc_id, source, kind, modified, tags):
                allowed.append(int(row))
        return cls(where, np.asarray(sorted(allowed), dtype=np.int64), total)

    def __len__(self) -> int:
        return len(self.rows)

    def __contains__(self, row: object) -> bool:
        if not isinstance(row, (int, np.integer)) or not len(self.rows):
            return False
        i = int(np.searchsorted(self.rows, row))
        return i < len(self.rows) and int(self.rows[i]) == int(row)

    def contains(self, rows: np.ndarray) -> np.ndarray:
        """Which of `rows` are allowed, a bool array aligned with them (a binary search each: for the few
        rows of one query; `mask` keeps the answer for a whole index's rows)."""
        rows = np.asarray(rows, dtype=np.int64)
        if not len(self.rows):
            return np.zeros(rows.shape, dtype=bool)
        pos = np.minimum(np.searchsorted(self.rows, rows), len(self.rows) - 1)
        return np.asarray(self.rows[pos] == rows)

    def _masked(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        key = id(rows)
        with self._lock:
            kept = self._masks.get(key)
            if kept is not None and kept[0] is rows:
                return kept
        m = np.isin(rows, self.rows)
        found = (rows, m, rows[m])
        with self._lock:
            if len(self._masks) > 8:
                self._masks.clear()
            self._masks[key] = found
        return found

    def mask(self, rows: np.ndarray) -> np.ndarray:
        """Which of `rows` are allowed (a bool array aligned with them); kept for arrays asked again
        (a retriever's row array is the same object for a whole index generation)."""
        return self._masked(rows)[1]

    def among(self, rows: np.ndarray) -> np.ndarray:
        """The allowed ones of `rows`, in their order (kept as `mask` is)."""
        return self._masked(rows)[2]

    def derived(self, source: S, make: Callable[[S], D]) -> D:
        """`make(source)`, made once per `source` object for these rows (a retriever ranking within them)."""
        key = id(source)
        with self._lock:
            kept = self._derived.get(key)
            if kept is not None and kept[0] is source:
                return cast("D", kept[1])
        made = make(source)
        with self._lock:
            self._derived[key] = (source, made)
        return made

    def keep(self, hits: Sequence[Hit]) -> list[Hit]:
        return [h for h in hits if h.row in self]

    def trace(self) -> dict[str, Any]:
        """What the trace says about the filter: the filter and how many rows it allowed."""
        return {"where": self.where.to_dict(), "allowed": len(self.rows), "passages": self.total}
