"""What the review queue holds: `ReviewItem` (an answer to look at, why, and the reviewer's `Review`) and
`ReviewCandidate` (what enters), built from an answer's JSON by `candidate_of` / `answer_body`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, get_args

from amsrag.errors import InputError
from amsrag.querylog.entry import iso
from amsrag.types import COMPLEXITIES, Complexity

Kind = Literal["flagged", "suspect", "shadow"]
Status = Literal["open", "reviewed", "dismissed"]
Verdict = Literal["right", "wrong"]
KINDS: tuple[Kind, ...] = get_args(Kind)
STATUSES: tuple[Status, ...] = get_args(Status)
VERDICTS: tuple[Verdict, ...] = get_args(Verdict)
# The true class a reviewer gives: the classifier's own labels (zero_hop: no retrieval needed).
TRUE_CLASSES: tuple[Complexity, ...] = COMPLEXITIES
SNIPPET_CHARS = 600  # cited passages are stored cut to this (the reviewer sees the evidence, not the document)
MAX_NOTE_CHARS = 4000


def check_kind(kind: str) -> Kind:
    if kind not in KINDS:
        raise InputError(f"unknown review item kind {kind!r}; use one of {', '.join(KINDS)}")
    return kind


def check_status(status: str) -> Status:
    if status not in STATUSES:
        raise InputError(f"unknown review status {status!r}; use one of {', '.join(STATUSES)}")
    return status


def check_verdict(verdict: str) -> Verdict:
    if verdict not in VERDICTS:
        raise InputError(f"unknown verdict {verdict!r}: the answer is {' or '.join(VERDICTS)}")
    return verdict


def check_true_class(true_class: str | None) -> Complexity | None:
    if true_class is None or true_class == "":
        return None
    if true_class not in TRUE_CLASSES:
        raise InputError(f"unknown true class {true_class!r}; use one of {', '.join(TRUE_CLASSES)} "
                         f"(zero_hop: the question needs no retrieval)")
    return true_class


def check_note(note: str) -> str:
    if len(note) > MAX_NOTE_CHARS:
        raise InputError(f"the note is {len(note)} characters; the limit is {MAX_NOTE_CHARS}")
    return note


@dataclass(frozen=True, slots=True)
class Review:
    verdict: Verdict
    true_class: Complexity | None
    note: str
    reviewed_at: datetime

    def to_dict(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "true_class": self.true_class, "note": self.note,
                "reviewed_at": iso(self.reviewed_at)}


@dataclass(frozen=True, slots=True)
class ReviewCandidate:
    """An answer entering the queue. `answer`: its body (`answer_body`); `details`: what a shadow probe found."""

    kind: Kind
    reason: str
    query: str
    system: str
    answer: dict[str, Any]
    details: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class ReviewItem:
    """`ts`: when it last entered (a repeat of an open item's question refreshes it); `seen`: how often."""

    id: int
    ts: datetime
    created: datetime
    kind: Kind
    reason: str
    query: str
    system: str
    answer: dict[str, Any]
    details: dict[str, Any] | None
    seen: int
    status: Status
    review: Review | None

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "ts": iso(self.ts), "created": iso(self.created), "kind": self.kind,
                "reason": self.reason, "query": self.query, "system": self.system, "answer": self.answer,
                "details": self.details, "seen": self.seen, "status": self.status,
                "review": None if self.review is None else self.review.to_dict()}


def answer_body(answer: Mapping[str, Any], sources: list[Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """What a reviewer needs of an answer (the ask JSON, `AnswerResult.to_dict()` with or without the service's
    `sources`): the answer, its citations and cited passages (cut), the route, the signals, the audit, the
    corrective step and the escalations."""
    trace = answer.get("trace") or {}
    given = sources if sources is not None else answer.get("sources") or []
    cited = [{"id": str(s.get("id", "")), "title": str(s.get("title", "")),
              "text": str(s.get("text", ""))[:SNIPPET_CHARS]} for s in given]
    return {"answer": answer.get("answer"), "abstained": bool(answer.get("abstained")),
            "citations": list(answer.get("citations") or []), "sources": cited,
            "complexity": trace.get("complexity"), "strategy": trace.get("strategy"), "reason": trace.get("reason"),
            "signals": trace.get("signals"), "audit": trace.get("audit"), "corrective": trace.get("corrective"),
            "escalations": trace.get("escalations") or []}


def _why(signals: Mapping[str, Any]) -> str:
    parts = []
    if signals.get("disagreement"):
        parts.append(f"confident answer ({signals.get('confidence'):.2f}) unsupported by its citations")
    elif signals.get("flagged"):
        support = signals.get("support")
        parts.append("the audit flags the answer" + (f" (support {support:.2f})"
                                                     if isinstance(support, int | float) else ""))
    if signals.get("sufficiency_failed"):
        parts.append("the first pass's evidence failed the sufficiency check")
    if signals.get("gray_zone"):
        parts.append("routing alpha in the gray zone")
    if signals.get("escalations"):
        parts.append(f"{signals['escalations']} escalation(s)")
    route = signals.get("route_label")
    if route:
        alpha = signals.get("route_alpha")
        parts.append(f"routed {route}" + (f" (alpha {alpha:.2f})" if isinstance(alpha, int | float) else ""))
    return "; ".join(parts)


def candidate_of(answer: Mapping[str, Any], system: str, flagged: bool = True,
                 suspects: bool = True) -> ReviewCandidate | None:
    """The review candidate of an answer (the ask JSON) by its trace's signals: a flagged answer, or a
    suspect (a cheap route with a sign of a misroute); None when neither applies (or is wanted)."""
    signals = (answer.get("trace") or {}).get("signals") or {}
    if flagged and signals.get("flagged"):
        kind: Kind = "flagged"
    elif suspects and signals.get("suspect"):
        kind = "suspect"
    else:
        return None
    return ReviewCandidate(kind, _why(signals), str(answer.get("query", "")), system, answer_body(answer))
