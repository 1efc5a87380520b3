"""Values kept per pair of live objects within a memory budget: what a filtered dense search gathers once and
reuses (the allowed rows' vectors, `amsrag.retrieve.filtered` and `amsrag.retrievers.pg_gather`).

A value is keyed by two objects compared by identity and held weakly, so it never outlives what it was made
from (a store resolves a filter again into a new object when its passages change). At most `budget` bytes are
kept in all, the least recently used dropped first; a value larger than `largest` is not kept.
"""

from __future__ import annotations

import threading
import weakref
from abc import ABC, abstractmethod
from collections import OrderedDict
from typing import Generic, TypeVar

V = TypeVar("V")


class KeptByPair(ABC, Generic[V]):
    """The budgeted store; subclasses say what a value weighs (`size`)."""

    def __init__(self, budget: int, largest: int) -> None:
        self.budget, self.largest = budget, largest
        self.used = 0
        self._kept: OrderedDict[tuple[int, int], tuple[weakref.ref[object], weakref.ref[object], V]] = OrderedDict()
        self._lock = threading.Lock()

    @abstractmethod
    def size(self, value: V) -> int:
        """The bytes `value` holds, counted against the budget."""

    def __len__(self) -> int:
        return len(self._kept)

    def get(self, first: object, second: object) -> V | None:
        """The value kept for (`first`, `second`) (None: none kept)."""
        key = (id(first), id(second))
        with self._lock:
            kept = self._kept.get(key)
            if kept is None:
                return None
            if kept[0]() is not first or kept[1]() is not second:  # ids reused by new objects
                self._drop(key)
                return None
            self._kept.move_to_end(key)
            return kept[2]

    def put(self, first: object, second: object, value: V) -> bool:
        """Keep `value` for (`first`, `second`) when it fits, dropping the least recently used; True when kept."""
        weight = self.size(value)
        if weight > min(self.largest, self.budget):
            return False
        key = (id(first), id(second))
        with self._lock:
            for stale in [k for k, (a, b, _) in self._kept.items() if a() is None or b() is None]:
                self._drop(stale)
            if key in self._kept:
                self._drop(key)
            while self._kept and self.used + weight > self.budget:
                self._drop(next(iter(self._kept)))
            self._kept[key] = (weakref.ref(first), weakref.ref(second), value)
            self.used += weight
        return True

    def drop(self, first: object, second: object) -> None:
        """Forget the value kept for (`first`, `second`) (found out of date)."""
        key = (id(first), id(second))
        with self._lock:
            kept = self._kept.get(key)
            if kept is not None and kept[0]() is first and kept[1]() is second:
                self._drop(key)

    def _drop(self, key: tuple[int, int]) -> None:
        self.used -= self.size(self._kept.pop(key)[2])

    def clear(self) -> None:
        with self._lock:
            self._kept.clear()
            self.used = 0
