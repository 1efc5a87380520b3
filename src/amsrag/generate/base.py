"""The generator stage (DESIGN §2): a = f(q, D*) with citations, behind one Protocol."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from amsrag.errors import AmsragError

ABSTAIN = "insufficient evidence"


class GeneratorError(AmsragError):
    """A generator backend failed (model missing, server unreachable, bad response)."""


@runtime_checkable
class EvidencePassage(Protocol):
    """What a generator reads: the engine's `ScoredPassage` fits, `amsrag.types.Passage` too."""

    @property
    def id(self) -> str: ...

    @property
    def title(self) -> str: ...

    @property
    def text(self) -> str: ...


@dataclass(frozen=True, slots=True)
class Quote:
    """The sentence that supports an answer, with the answer's span in it: `text[start:end]` is the span the
    reader chose (the whole sentence when the answer is the sentence); `passage_id` names the passage."""

    text: str
    start: int
    end: int
    passage_id: str

    @property
    def span(self) -> str:
        return self.text[self.start:self.end]

    def marked(self, left: str = "«", right: str = "»") -> str:
        """The sentence with the span between `left` and `right`."""
        return f"{self.text[:self.start]}{left}{self.span}{right}{self.text[self.end:]}"

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "start": self.start, "end": self.end, "passage_id": self.passage_id}


@dataclass(frozen=True, slots=True)
class Generation:
    """One answer. `citations` are ids of passages that were given (validated); `confidence` in [0, 1]
    when the generator can estimate it; `abstained` = "insufficient evidence"; `quote`: the supporting sentence
    with the answer span marked, when the generator knows where it read the answer."""

    answer: str
    citations: tuple[str, ...] = ()
    confidence: float | None = None
    abstained: bool = False
    prompt_tokens: int = 0
    output_tokens: int = 0
    ms: float = 0.0
    generator: str = ""
    details: dict[str, Any] = field(default_factory=dict, compare=False)
    quote: Quote | None = None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["citations"] = list(self.citations)
        d["quote"] = self.quote.to_dict() if self.quote is not None else None
        return d


@runtime_checkable
class Generator(Protocol):
    name: str
    knows: bool  # answers from its own knowledge (closed book)
    logprobs: bool  # token log-probabilities available (confidence of closed-book answers)
    streaming: bool

    def generate(self, question: str, passages: Sequence[EvidencePassage]) -> Generation: ...

    def closed_book(self, question: str) -> Generation: ...


@runtime_checkable
class Completes(Protocol):
    """A generator that also answers a free-form prompt (the LLMs): map-reduce and text-to-SQL use it."""

    def complete(self, prompt: str) -> str: ...


@runtime_checkable
class ReadsQueryVector(Protocol):
    """A generator that embeds the question and can take the engine's query embedding instead (one
    embedding per query, DESIGN §2)."""

    def generate_with_vector(self, question: str, passages: Sequence[EvidencePassage],
                             query_vector: np.ndarray | None) -> Generation: ...


@runtime_checkable
class CalibratedReader(Protocol):
    """A generator that reads the evidence in well under a second and whose `Generation.confidence` is a
    calibrated probability that the answer is right: the engine lets it read the first pass and skips
    the corrective check when it is confident (`corrective.reader_gate`)."""

    calibrated_confidence: bool


@runtime_checkable
class AbstainsBelow(Protocol):
    """A generator that abstains below a calibrated confidence `threshold` and can read with another one (the
    engine lowers it for questions routed multi-hop, whose answer is read across passages)."""

    threshold: float

    def at_threshold(self, threshold: float) -> Generator: ...


def generate_answer(generator: Generator, question: str, passages: Sequence[EvidencePassage],
                    query_vector: np.ndarray | None = None) -> Generation:
    """`generator`'s answer over `passages`, handing it the query embedding when it can use one."""
    if isinstance(generator, ReadsQueryVector):
        return generator.generate_with_vector(question, passages, query_vector)
    return generator.generate(question, passages)


def check_passages(passages: Sequence[Any]) -> list[EvidencePassage]:
    """Passages as a list, each with string `id`, `title`, `text` (else a clear error)."""
    out = []
    for i, p in enumerate(passages):
        for attr in ("id", "title", "text"):
            if not isinstance(getattr(p, attr, None), str):
                raise GeneratorError(f"passage {i} has no string `{attr}` (got {type(p).__name__})")
        out.append(p)
    return out


def validate_citations(cited: Sequence[str], passages: Sequence[EvidencePassage]) -> tuple[str, ...]:
    """The cited ids that name a given passage, in order, without repeats."""
    given = {p.id for p in passages}
    seen: dict[str, None] = {}
    for c in cited:
        if c in given:
            seen.setdefault(c, None)
    return tuple(seen)


_CITE = re.compile(r"\[\s*(\d+(?:\s*[,;]\s*\d+)*)\s*\]")


def parse_citations(text: str, passages: Sequence[EvidencePassage]) -> tuple[str, tuple[str, ...], list[int]]:
    """Split an LLM answer into (answer without markers, valid cited passage ids, invalid numbers).

    Markers are `[n]` or `[n, m]` with n counting from 1 over `passages`; numbers outside 1..len(passages)
    are dropped and returned as invalid (a model citing a passage it was not given).
    """
    cited: list[str] = []
    invalid: list[int] = []
    for m in _CITE.finditer(text):
        for n in re.split(r"[,;]", m.group(1)):
            k = int(n)
            if 1 <= k <= len(passages):
                cited.append(passages[k - 1].id)
            else:
                invalid.append(k)
    answer = " ".join(_CITE.sub(" ", text).split())
    answer = re.sub(r"\s+([.,;:!?])", r"\1", answer).strip()
    return answer, validate_citations(cited, passages), invalid
