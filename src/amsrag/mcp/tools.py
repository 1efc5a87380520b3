"""The MCP tools' typed `where` input and typed results (their output schemas), built from the engine's own objects."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from amsrag.api import Citation, Route
from amsrag.api.passages import Retrieved
from amsrag.filters import Where

Values = list[str] | str | None


class ModifiedIn(BaseModel):
    """Bounds on the document file's last modification (UTC), all of which hold."""

    model_config = ConfigDict(extra="forbid")
    gte: str | None = Field(None, description="on or after: YYYY-MM-DD or YYYY-MM-DDTHH:MM[:SS][Z|±HH:MM]")
    gt: str | None = Field(None, description="after (a date: from the next day on)")
    lte: str | None = Field(None, description="on or before (a date: the whole day)")
    lt: str | None = Field(None, description="before")


class WhereIn(BaseModel):
    """Only the passages this metadata filter allows, as the HTTP API's `where` (docs/metadata-filters.md):
    fields AND together, the values of one field OR; a field takes a list or a single string."""

    model_config = ConfigDict(extra="forbid")
    source: Values = Field(None, description="globs of the file's path inside its folder or of its document key "
                                             "(`guides/*.pdf`; `*` also matches `/`)")
    type: Values = Field(None, description="input formats: pdf, html, docx, pptx, epub, markdown, text")
    doc: Values = Field(None, description="globs of the document key (`NAME/relative/path`)")
    tag: Values = Field(None, description="document tags, any of them (exact, case-sensitive)")
    modified: ModifiedIn | None = None

    def parsed(self) -> Where:
        """The filter; an `InputError` naming what is wrong (an unknown type, a date that is not one, ...)."""
        return Where.from_json(self.model_dump(exclude_none=True))


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
    anchor: str | None = Field(None, description="the fragment that opens the source file at the section (an HTML "
                                                 "heading's id, a Markdown heading's slug)")

    @classmethod
    def of(cls, c: Citation) -> PassageOut:
        return cls(id=c.id, title=c.title, text=c.text, source=c.source, page=c.page, section=c.section,
                   anchor=c.anchor)


class ScoredPassageOut(PassageOut):
    score: float
    rank: int

    @classmethod
    def retrieved(cls, r: Retrieved) -> ScoredPassageOut:
        meta: dict[str, Any] = r.metadata
        return cls(id=r.id, title=meta["title"], text=r.text, score=r.score, rank=meta["rank"],
                   source=meta.get("source"), page=meta.get("page"), section=meta.get("section"),
                   anchor=meta.get("anchor"))


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
