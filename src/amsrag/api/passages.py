"""What every adapter (`amsrag.integrations`, the MCP server) hands on: `Engine.retrieve`'s passages in its
order, each with the metadata the frameworks carry (score, rank, route, title, passage id; source, page, section,
anchor and document when the ingest recorded them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from amsrag.api import Citation, Index

if TYPE_CHECKING:
    from amsrag.pipeline.engine import Engine
    from amsrag.pipeline.results import RetrievalResult

SOURCE_KEYS = ("source", "page", "section", "anchor")


@dataclass(frozen=True, slots=True)
class Retrieved:
    """One passage of a retrieval with the metadata an adapter attaches to its framework's document."""

    id: str
    text: str
    score: float
    metadata: dict[str, Any]


def engine_of(source: Index | Engine) -> Engine:
    """The engine of an `amsrag.Index`, or `source` itself when it is an engine."""
    return source.engine if isinstance(source, Index) else source


def retrieve(engine: Engine, question: str, system: str = "full", k: int | None = None) -> list[Retrieved]:
    """`engine.retrieve(question, system, k)`'s passages as `Retrieved`, best first."""
    return retrieved(engine, engine.retrieve(question, system=system, k=k))


def retrieved(engine: Engine, result: RetrievalResult) -> list[Retrieved]:
    """The passages of `result` with their metadata, from the stored passages the engine read (any it did not
    hand on are read in one call)."""
    trace = result.trace
    label = trace.complexity.routed[0] if trace.complexity is not None else None
    rows = [p.row for p in result.passages if p.row >= 0 and p.stored is None]
    stored = {p.id: p for p in engine.index.passages_by_rows(rows)} if rows else {}
    out = []
    for rank, p in enumerate(result.passages, 1):
        meta: dict[str, Any] = {"id": p.id, "title": p.title, "score": p.score, "rank": rank,
                                "route": trace.strategy, "complexity": label, "system": trace.system}
        passage = p.stored if p.stored is not None and p.row >= 0 else stored.get(p.id)
        if passage is not None:
            citation = Citation.of(passage)
            meta["doc_id"] = citation.doc_id
            for key in SOURCE_KEYS:
                value = getattr(citation, key)
                if value is not None:
                    meta[key] = value
        out.append(Retrieved(p.id, p.text, p.score, meta))
    return out
