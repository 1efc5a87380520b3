"""What the span reader reads out: span candidates, its result and alternatives, the support of given answers,
and the shaping of a span's text (an option's leading dashes, its first line)."""

from __future__ import annotations

from dataclasses import dataclass, field

from amsrag.generate.base import Quote


@dataclass(frozen=True, slots=True)
class SpanCandidate:
    text: str
    passage: int  # index into the passages (a span of a joint context is mapped to its passage)
    score: float  # best start+end logit minus the window's no-answer score (+ retrieval feature)
    prob: float  # softmax probability of the span within its window (no-answer included)
    char_start: int = 0
    char_end: int = 0


@dataclass(frozen=True, slots=True)
class Alternative:
    answer: str
    passage_id: str
    score: float


@dataclass(frozen=True, slots=True)
class ReaderResult:
    """What `SpanReader.read` returns. `answer` is the best answer even when `abstained` (then the
    generator says "insufficient evidence"); `confidence` is the calibrated probability it is right."""

    answer: str
    kind: str  # span | yes | no | option
    passage_id: str | None
    confidence: float
    abstained: bool
    alternatives: tuple[Alternative, ...] = ()
    ms: float = 0.0
    features: dict[str, float] = field(default_factory=dict)
    quote: Quote | None = None  # the sentence holding the chosen span (of the best span for yes / no)
    quote_features: dict[str, float] = field(default_factory=dict)
    quote_confidence: float | None = None  # calibrated P(the quote holds the answer); None: no calibration


@dataclass(frozen=True, slots=True)
class SpanSupport:
    """The reader's support of one answer string in given passages (`SpanReader.answer_support`)."""

    answer: str
    prob: float  # best span probability of an occurrence of the answer (its window's softmax, no-answer included)
    score: float  # that span's start+end logit minus the window's no-answer score
    found: bool  # the answer occurs as a readable span (or is yes / no)
    passage_id: str | None  # where the best occurrence is


@dataclass(frozen=True, slots=True)
class SupportReading:
    answers: tuple[SpanSupport, ...]  # aligned with the answers asked about
    candidates: tuple[SpanSupport, ...]  # the reader's own best distinct spans, best first
    top_prob: float  # the best span probability of any span in the passages
    windows: int


def option_dashes(context: str, start: int) -> int:
    """How many dashes ("--" or "-") open the option a span starting at `start` names: the word pieces split
    "--frozen" into "-", "-", "frozen" and a span may start at the word."""
    for n in (2, 1):
        i = start - n
        if i >= 0 and context[i:start] == "-" * n and (i == 0 or context[i - 1].isspace()) \
                and start < len(context) and context[start].isalpha():
            return n
    return 0


def first_line(c: SpanCandidate) -> SpanCandidate:
    """`c` cut at its first line break ("--keep-going\nBuild as many crates" → "--keep-going") and without the
    sentence's closing punctuation ("flag: --strict." → "--strict")."""
    head = c.text.split("\n", 1)[0].rstrip().rstrip(".,;:")
    return c if head == c.text else SpanCandidate(head, c.passage, c.score, c.prob, c.char_start,
                                                  c.char_start + len(head))
