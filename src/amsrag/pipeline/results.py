"""What the engine hands back: the retrieval and answer results, `Engine.answer`'s outcome, and the one check
every question passes before any work (shared by the CLI, the engine and the service)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from amsrag.classify.features import EMPTY_QUESTION, is_blank
from amsrag.correct import Strip
from amsrag.errors import InputError
from amsrag.generate import Generation, Quote
from amsrag.pipeline.scored import ScoredPassage
from amsrag.pipeline.trace import AuditTrace, Trace
from amsrag.pipeline.trace_parts import GeneratorTrace
from amsrag.types import describe_bad_char, lone_surrogate_at

LIMIT_SETTING = "serve.max_question_chars"


class QuestionError(InputError):
    """A question refused before any work: too long, empty, not text. `code` is the service's error code."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code



def check_question(question: object, limit: int) -> str:
    """The question, stripped, or a `QuestionError` with the one message the CLI, the engine and the service
    give: longer than `limit` characters (`serve.max_question_chars`), or nothing but white space and
    control characters. The length is checked first, so a huge question costs nothing."""
    if not isinstance(question, str):
        raise QuestionError("invalid_request", f"the question must be text, got {type(question).__name__}")
    if len(question) > limit:
        raise QuestionError("question_too_long", f"the question is {len(question)} characters long; the limit is "
                                                 f"{limit} ({LIMIT_SETTING})")
    bad = lone_surrogate_at(question)
    if bad is not None:
        raise QuestionError("invalid_text", f"the question is not valid Unicode: {describe_bad_char(question, bad)}; "
                                            f"send UTF-8 text")
    stripped = question.strip()
    if is_blank(stripped):
        raise QuestionError("invalid_request", EMPTY_QUESTION)
    return stripped


@dataclass(frozen=True, slots=True)
class RetrievalResult:
    query: str
    passages: list[ScoredPassage]
    trace: Trace
    strips: tuple[Strip, ...] = ()  # the corrective step's sentence strips of the passages it judged relevant

    def to_dict(self) -> dict[str, Any]:
        return {"query": self.query,
                "passages": [{"id": p.id, "title": p.title, "text": p.text, "score": p.score} for p in self.passages],
                "trace": self.trace.to_dict()}


@dataclass(frozen=True, slots=True)
class AnswerResult:
    query: str
    answer: str
    citations: list[str]
    abstained: bool
    trace: Trace
    quote: Quote | None = None  # the supporting sentence with the answer span marked
    parts: tuple[AnswerResult, ...] = ()  # a question asking several things: each part's own answer

    @property
    def audit(self) -> AuditTrace | None:
        """The citation-support audit (None only for answers that did not come from `Engine.ask`)."""
        return self.trace.audit

    @property
    def flagged(self) -> bool:
        """The audit found the cited text does not support the answer (support below its threshold)."""
        return self.trace.audit is not None and self.trace.audit.flagged

    def to_dict(self) -> dict[str, Any]:
        out = {"query": self.query, "answer": self.answer, "citations": self.citations,
               "abstained": self.abstained, "quote": self.quote.to_dict() if self.quote is not None else None,
               "trace": self.trace.to_dict()}  # flagged: trace["audit"]
        if self.parts:
            out["parts"] = [p.to_dict() for p in self.parts]
        return out



@dataclass(frozen=True, slots=True)
class Answered:
    """`Engine.answer`'s outcome: the evidence, the answer, the time spent generating, and the fallback's
    error when the requested generator failed."""

    retrieval: RetrievalResult
    generation: Generation
    generate_ms: float
    requested: str
    error: str | None = None

    def trace_entry(self) -> GeneratorTrace:
        if self.error is None:
            return GeneratorTrace.of(self.generation)
        return GeneratorTrace.of(self.generation, self.requested, self.error)


def reading_evidence(result: RetrievalResult, strips: bool = False) -> list[ScoredPassage]:
    """What a generator reads: the passages, or with `strips` each passage's corrective-step strip where
    the step made one (the passage itself otherwise)."""
    if not strips or not result.strips:
        return list(result.passages)
    by_id = {s.passage_id: s for s in result.strips}
    return [ScoredPassage(p.id, p.title, by_id[p.id].text, p.score, p.row) if p.id in by_id else p
            for p in result.passages]
