"""The multi-hop path's second hop (DESIGN §4, Strategy C on multi_hop), without an LLM.

From the first hop's top passages take the bridge entities — entities those passages mention that
the question does not (a film's passage names its director; the question asks where the director
was born) — and fetch, per bridge, the passage titled by it plus BM25's best hits for the bridge
with the question. The second-hop list is fused with the first hop by weighted RRF (the first
hop's fused ranking weighs 1, the second hop `weight`). Rounds are bounded by `hops`.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from amsrag.config import SecondHopConfig
from amsrag.fuse import FusedItem, FusedList, WeightedRRF
from amsrag.indexes.entities import entity_key
from amsrag.retrievers import scoped_retriever
from amsrag.store.base import PassageIndex
from amsrag.types import Hit

HOP_K = 60.0  # RRF constant of the hop fusion


@runtime_checkable
class EntityBridges(Protocol):
    """What the second hop asks of an entity graph."""

    def query_entities(self, query: str) -> list[int]: ...

    def bridge_entities(self, rows: Sequence[int], exclude: Iterable[int], limit: int) -> list[tuple[int, int]]: ...

    def entity_key_of(self, entity: int) -> str: ...

    def title_rows(self, entity: int) -> list[int]: ...


@dataclass(slots=True)
class Expansion:
    fused: FusedList
    rounds: list[dict[str, Any]] = field(default_factory=list)
    ms: float = 0.0
    hits: list[Hit] = field(default_factory=list)  # every round's second-hop passages, in the order found

    def to_dict(self) -> dict[str, Any]:
        return {"rounds": self.rounds, "ms": round(self.ms, 3)}


def _as_hits(items: list[FusedItem], name: str) -> list[Hit]:
    return [Hit(id=it.id, score=it.score, rank=i + 1, title=it.title, retriever=name, row=it.row)
            for i, it in enumerate(items)]


def _names(text: str, key: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(key)}(?!\w)", text) is not None


def expand(index: PassageIndex, query: str, first: FusedList, config: SecondHopConfig, depth: int) -> Expansion:
    """`first` fused with up to `config.hops` rounds of bridge-entity expansion."""
    t0 = time.perf_counter()
    graph = getattr(scoped_retriever(index, "graph"), "graph", None)
    if not isinstance(graph, EntityBridges):
        raise TypeError("the second hop needs an entity-graph retriever whose graph names bridge entities")
    bm25 = scoped_retriever(index, "bm25")
    used = set(graph.query_entities(query))
    lowered = entity_key(query)
    current = first
    rounds: list[dict[str, Any]] = []
    found_hits: list[Hit] = []
    for _ in range(config.hops):
        sources = [it.row for it in current.top(config.from_passages)]
        candidates = graph.bridge_entities(sources, used, 3 * config.bridges)
        used.update(e for e, _ in candidates)
        # an entity the question already names (even inside a longer name) leads nowhere new
        bridges = [(e, r) for e, r in candidates if not _names(lowered, graph.entity_key_of(e))][: config.bridges]
        if not bridges:
            break
        rows: list[int] = []
        seen: set[int] = set()
        trace_bridges = []
        for entity, from_row in bridges:
            key = graph.entity_key_of(entity)
            found = [r for r in graph.title_rows(entity) if r not in seen]
            found += [h.row for h in bm25.search(f"{key} {query}", k=config.per_bridge) if h.row not in seen
                      and h.row not in found]
            seen.update(found)
            rows.extend(found)
            trace_bridges.append({"entity": key, "from_row": from_row, "rows": found})
        if not rows:
            break
        described = index.describe_rows(rows)
        hop_hits = [Hit(id=pid, score=1.0 / (i + 1), rank=i + 1, title=title, retriever="hop2", row=row)
                    for i, (row, (pid, title)) in enumerate(zip(rows, described, strict=True))]
        known = {h.id for h in found_hits}
        found_hits += [Hit(id=h.id, score=h.score, rank=len(found_hits) + n + 1, title=h.title, retriever="hop2",
                           row=h.row) for n, h in enumerate(h for h in hop_hits if h.id not in known)]
        hop1 = _as_hits(current.top(depth), "hop1")
        fused = WeightedRRF({"hop1": 1.0, "hop2": config.weight}, k=HOP_K).fuse({"hop1": hop1, "hop2": hop_hits})
        # the method, weights and k stay the first hop's: the trace shows how the retrievers were fused
        current = FusedList(first.method, fused.items, first.weights, first.k,
                            {**first.params, "hop_weights": {"hop1": 1.0, "hop2": config.weight}})
        rounds.append({"bridges": trace_bridges, "candidates": len(rows)})
    return Expansion(current, rounds, (time.perf_counter() - t0) * 1000, found_hits)
