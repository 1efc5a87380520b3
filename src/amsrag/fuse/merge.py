"""Merging whole evidence lists by RRF: the kept passages of a pass, a wider pass, external results.

Unlike the retriever fusion of `rank_fusion`, the lists hold passages (anything with an `id`), and the
merged list keeps the first list's copy of a passage that several lists hold.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeVar

from amsrag.fuse.rank_fusion import RRF
from amsrag.types import Hit


class HasId(Protocol):
    @property
    def id(self) -> str: ...


P = TypeVar("P", bound=HasId)


def merge_lists(lists: Sequence[Sequence[P]], k: int, rrf_k: float = 60.0) -> list[tuple[P, float]]:
    """The top k of the lists' RRF fusion as (first-seen passage, RRF score), ties by passage id."""
    first: dict[str, P] = {}
    ranked: dict[str, list[Hit]] = {}
    width = len(str(len(lists)))
    for n, passages in enumerate(lists):
        for p in passages:
            first.setdefault(p.id, p)
        # names that sort in list order: RRF sums contributions in sorted name order
        ranked[f"{n:0{width}d}"] = [Hit(id=p.id, score=0.0, rank=rank) for rank, p in enumerate(passages, 1)]
    fused = RRF(rrf_k).fuse(ranked)
    return [(first[it.id], it.score) for it in fused.top(k)]
