"""The trace's entries for the generator and the two routes beside retrieval (the table route and the global route),
as typed records. Each `to_dict` gives the JSON entry of the contract (`--json`, the HTTP API), keys in order."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeAlias

if TYPE_CHECKING:
    from amsrag.generate import Generation
    from amsrag.pipeline.scored import ScoredPassage
    from amsrag.themes.search import SelectedTheme


@dataclass(frozen=True, slots=True)
class GeneratorTrace:
    """The generator's entry: who answered, the tokens and time it took, its confidence, what else it reported
    (`details`, in its order), and, when the requested generator failed, its name and error (the extractive
    answer stands in)."""

    name: str
    prompt_tokens: int = 0
    output_tokens: int = 0
    ms: float = 0.0
    confidence: float | None = None
    details: dict[str, Any] = field(default_factory=dict)
    requested: str | None = None
    error: str | None = None

    @classmethod
    def of(cls, g: Generation, requested: str | None = None, error: str | None = None) -> GeneratorTrace:
        """The entry of `g`; `requested` and `error`: the generator that failed and why."""
        return cls(g.generator, g.prompt_tokens, g.output_tokens, g.ms, g.confidence, g.details, requested, error)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "prompt_tokens": self.prompt_tokens,
                               "output_tokens": self.output_tokens, "ms": round(self.ms, 3),
                               "confidence": self.confidence}
        out.update({k: v for k, v in self.details.items() if k not in out})
        if self.error is not None:
            out.update({"requested": self.requested, "error": self.error, "fallback": "extractive"})
        return out


@dataclass(frozen=True, slots=True)
class RouteFallback:
    """A table or global route that did not answer, and why; `tried`: the tables the table route tried (None: it
    did not run), `ms`: the time it took (None: it did not run)."""

    fallback: str
    tried: tuple[TableAttempt, ...] | None = None
    ms: float | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"fallback": self.fallback}
        if self.tried is not None:
            out["tried"] = [t.to_dict() for t in self.tried]
        if self.ms is not None:
            out["ms"] = round(self.ms, 3)
        return out


@dataclass(frozen=True, slots=True)
class TableAttempt:
    """One table the table route tried: its answer and confidence, or the error of its statement (`llm_error`: the
    LLM's statement failed, and the parser's is tried next)."""

    table: str
    confidence: float | None = None
    answer: tuple[str, ...] | None = None
    error: str | None = None
    llm_error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        if self.llm_error is not None:
            return {"table": self.table, "llm_error": self.llm_error}
        if self.error is not None:
            return {"table": self.table, "error": self.error}
        return {"table": self.table, "confidence": self.confidence, "answer": list(self.answer or ())}


@dataclass(frozen=True, slots=True)
class TableTrace:
    """The table route's answer: the table, the statement and the program kind, the confidence (rounded to 4
    places), the rows the answer came from, how many programs were ranked, the tables tried and the rows cited."""

    table: str
    sql: str
    program: str
    confidence: float
    rows: tuple[int, ...]
    candidates: int
    tried: tuple[TableAttempt, ...]
    ms: float
    cited: tuple[ScoredPassage, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"table": self.table, "sql": self.sql, "program": self.program, "confidence": self.confidence,
                "rows": list(self.rows), "candidates": self.candidates, "tried": [t.to_dict() for t in self.tried],
                "ms": round(self.ms, 3), "cited": [{"id": p.id, "text": p.text} for p in self.cited]}


@dataclass(frozen=True, slots=True)
class ThemesTrace:
    """The global route's answer: how the themes were selected, the words the question is about, the corpus'
    themes and passages, and the themes selected."""

    mode: str
    selection: str
    focus_terms: tuple[str, ...]
    n_themes: int
    n_passages: int
    themes: tuple[SelectedTheme, ...]
    ms: float

    def to_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "selection": self.selection, "focus_terms": list(self.focus_terms),
                "n_themes": self.n_themes, "n_passages": self.n_passages,
                "themes": [{"id": t.id, "terms": list(t.label_terms), "size": t.size, "share": round(t.share, 4),
                            "score": round(t.score, 4), "representatives": list(t.representatives)}
                           for t in self.themes],
                "ms": round(self.ms, 3)}


TableRouteTrace: TypeAlias = TableTrace | RouteFallback
GlobalRouteTrace: TypeAlias = ThemesTrace | RouteFallback
