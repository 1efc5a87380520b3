"""What every fuser takes and gives (DESIGN §5): ranked lists per retriever in, one `FusedList` out."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, runtime_checkable

import numpy as np

from amsrag.types import Hit


@dataclass(frozen=True, slots=True)
class FusedItem:
    """One fused passage: its score, each retriever's rank of it and contribution to the score."""

    id: str
    row: int
    score: float
    title: str
    ranks: dict[str, int]
    contributions: dict[str, float]


@dataclass(frozen=True, slots=True)
class FusedList:
    """Fused passages, score descending, ties by id; `weights`/`k` per retriever; `params` for the trace."""

    method: str
    items: list[FusedItem]
    weights: dict[str, float]
    k: dict[str, float]
    params: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.items)

    def __iter__(self) -> Iterator[FusedItem]:
        return iter(self.items)

    def top(self, n: int) -> list[FusedItem]:
        """The first n items (all of them when fewer)."""
        return self.items[: max(n, 0)]

    def head(self, n: int) -> FusedList:
        """The same fused list cut to its first n items."""
        return replace(self, items=self.top(n))

    @property
    def ids(self) -> list[str]:
        return [it.id for it in self.items]

    @property
    def scores(self) -> np.ndarray:
        return np.fromiter((it.score for it in self.items), dtype=np.float64, count=len(self.items))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form for the trace."""
        return {
            "method": self.method,
            "weights": dict(self.weights),
            "k": dict(self.k),
            "params": dict(self.params),
            "items": [
                {"id": it.id, "row": it.row, "title": it.title, "score": it.score,
                 "ranks": dict(it.ranks), "contributions": dict(it.contributions)}
                for it in self.items
            ],
        }


@runtime_checkable
class Fuser(Protocol):
    """Fuses ranked lists, one per retriever, into one `FusedList`."""

    method: str

    def fuse(self, lists: Mapping[str, Sequence[Hit]]) -> FusedList: ...
