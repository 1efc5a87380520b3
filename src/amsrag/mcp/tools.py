"""The MCP tools' typed results (their output schemas), built from the engine's own objects."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from amsrag.api import Citation, Route
from amsrag.integrations.passages import Retrieved


class RouteOut(BaseModel):
    """How the question was routed."""

    strategy: str = Field(description="A/B/C: one, two or all retrievers; none, table or global")
    reason: str
    complexity: str | None = Field(None, description="zero_hop, one_hop or multi_hop, as routed")
    alpha: float | None = Field(None, description="the classifier's calibrated confidence")
    retrievers: list[str]

    @classmethod
    def of(cls, route: Route) -> RouteOut:
        return cls(strategy=route.strategy, reason=route.reason, complexity=route.complexity, alpha=route.alpha,
                   retrievers=list(route.retrievers))


class PassageOut(BaseModel):
    """A stored passage, with where it came from when the ingest recorded it."""

    id: str
    title: str
    text: str
    source: str | None = None
    page: int | None = None
    section: str | None = None

    @classmethod
    def of(cls, c: Citation) -> PassageOut:
        return cls(id=c.id, title=c.title, text=c.text, source=c.source, page=c.page, section=c.section)


class ScoredPassageOut(PassageOut):
    score: float
    rank: int

    @classmethod
    def retrieved(cls, r: Retrieved) -> ScoredPassageOut:
        meta: dict[str, Any] = r.metadata
        return cls(id=r.id, title=meta["title"], text=r.text, score=r.score, rank=meta["rank"],
                   source=meta.get("source"), page=meta.get("page"), section=meta.get("section"))


class SearchOut(BaseModel):
    """Adaptive retrieval's passages, best first, and the route that found them."""

    query: str
    passages: list[ScoredPassageOut]
    route: RouteOut


class AskPartOut(BaseModel):
    """One part of a question that asks several things, answered on its own."""

    question: str
    answer: str
    abstained: bool
    citations: list[str] = Field(description="ids of the passages this part cites (all are in `citations`)")


class AskOut(BaseModel):
    """The answer with the passages it cites, the route, and the audit's verdict."""

    question: str
    answer: str
    abstained: bool = Field(description="the evidence did not support an answer")
    flagged: bool = Field(description="the citation-support audit found the cited text does not support it")
    citations: list[PassageOut]
    route: RouteOut
    parts: list[AskPartOut] = Field(default_factory=list, description="a question asking several things: each "
                                    "part's own answer (`answer` joins them)")


class StoredPassageOut(PassageOut):
    doc_id: str
    metadata: dict[str, Any]
