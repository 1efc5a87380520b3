"""Plain data types shared by every stage."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

Complexity = Literal["zero_hop", "one_hop", "multi_hop"]
COMPLEXITIES: tuple[Complexity, ...] = ("zero_hop", "one_hop", "multi_hop")
# The router's taxonomy (seed 001 §3): the hop classes of text questions, plus questions whose answer is the
# corpus as a whole (aggregation) or a table (structured). Which of them a deployment uses is configuration.
QueryClass = Literal["zero_hop", "one_hop", "multi_hop", "aggregation", "structured"]
QUERY_CLASSES: tuple[QueryClass, ...] = ("zero_hop", "one_hop", "multi_hop", "aggregation", "structured")
# What kind of evidence a question needs; the task head predicts it, the hop classifier splits "text".
TaskKind = Literal["text", "aggregation", "structured"]
TASK_KINDS: tuple[TaskKind, ...] = ("text", "aggregation", "structured")
RouteKind = Literal["retrieval", "global", "table"]
ROUTE_KINDS: tuple[RouteKind, ...] = ("retrieval", "global", "table")
RetrieverName = Literal["bm25", "dense", "graph"]
RETRIEVERS: tuple[RetrieverName, ...] = ("bm25", "dense", "graph")  # the index's own retrievers, in trace order


# C0 controls but tab and line breaks, DEL, C1 controls: never text (a NUL-only file is not a passage).
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def strip_control(text: str) -> str:
    """`text` without control characters (tab, newline and carriage return kept)."""
    return _CONTROL.sub("", text)


def lone_surrogate_at(text: str) -> int | None:
    """The position of the first character that cannot be written as UTF-8 (a lone UTF-16 surrogate: a
    JSON `\\ud800` escape, or a command-line byte that was not UTF-8), None when there is none."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return exc.start
    return None


def describe_bad_char(text: str, at: int) -> str:
    """What `lone_surrogate_at` found, for an error message."""
    code = ord(text[at])
    if 0xDC80 <= code <= 0xDCFF:  # how Python carries an undecodable byte of a file name or an argument
        return f"character {at} is the byte 0x{code - 0xDC00:02X}, which is not UTF-8"
    return f"character {at} is a lone UTF-16 surrogate (U+{code:04X}), which is not text"


def is_blank(text: str) -> bool:
    """True when nothing but whitespace and control characters is left."""
    return not strip_control(text).strip()


def normalise_whitespace(text: str) -> str:
    return " ".join(text.split())


def content_hash(title: str, text: str) -> str:
    """SHA-256 of the whitespace-normalised title and text: the dedup key of a passage."""
    payload = normalise_whitespace(title) + "\x1f" + normalise_whitespace(text)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def passage_id_for(title: str, text: str) -> str:
    """Deterministic id for passages that arrive without one (first 16 hex digits of the content hash)."""
    return content_hash(title, text)[:16]


@dataclass(frozen=True, slots=True)
class Passage:
    """One retrievable unit of text."""

    id: str
    text: str
    title: str = ""
    doc_id: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def content_hash(self) -> str:
        return content_hash(self.title, self.text)

    @classmethod
    def make(
        cls,
        text: str,
        title: str = "",
        id: str | None = None,
        doc_id: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Passage:
        pid = id if id else passage_id_for(title, text)
        return cls(id=pid, text=text, title=title, doc_id=doc_id or pid, metadata=dict(metadata or {}))


class PassageRow(NamedTuple):
    """A stored passage as derived indexes see it: `row` is the store's internal integer id."""

    row: int
    id: str
    title: str
    text: str


@dataclass(frozen=True, slots=True)
class Hit:
    """One ranked result of a retriever; `rank` counts from 1."""

    id: str
    score: float
    rank: int
    title: str = ""
    retriever: str = ""
    row: int = -1  # internal store row, -1 when unknown (external sources)


@dataclass(slots=True)
class QAExample:
    """A question with its answers and the ids of its gold passages (empty when unknown)."""

    id: str
    question: str
    answers: list[str]
    gold_passage_ids: list[str] = field(default_factory=list)
    dataset: str = ""
    complexity: Complexity | None = None
    qtype: str | None = None  # dataset-specific type, e.g. HotpotQA "bridge" / "comparison"
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class QASet:
    """What a dataset loader yields: passages (deduplicated by content) plus questions over them."""

    passages: list[Passage] = field(default_factory=list)
    questions: list[QAExample] = field(default_factory=list)
    source: str = ""
