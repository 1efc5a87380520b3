"""The expected answer type of a question, from its wh-word and head noun (for the extractive reader)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

AnswerType = Literal["yesno", "choice", "person", "date", "place", "number", "org", "work", "norp", "language",
                     "other"]

# spaCy entity labels that can fill each type; "other" takes any entity or, failing that, a noun chunk.
ENTITY_LABELS: dict[str, frozenset[str]] = {
    "person": frozenset({"PERSON"}),
    "date": frozenset({"DATE", "TIME"}),
    "place": frozenset({"GPE", "LOC", "FAC"}),
    "number": frozenset({"CARDINAL", "QUANTITY", "MONEY", "PERCENT", "ORDINAL"}),
    "org": frozenset({"ORG"}),
    "work": frozenset({"WORK_OF_ART", "PRODUCT", "EVENT", "LAW"}),
    "norp": frozenset({"NORP", "GPE"}),
    "language": frozenset({"LANGUAGE", "NORP"}),
    "other": frozenset(),
}
# Second-choice labels: used when no entity of the first choice appears in the evidence.
FALLBACK_LABELS: dict[str, frozenset[str]] = {
    "person": frozenset({"ORG", "NORP"}),
    "place": frozenset({"ORG"}),
    "date": frozenset({"CARDINAL"}),
    "work": frozenset({"ORG", "PERSON"}),
    "org": frozenset({"GPE", "PERSON", "NORP"}),
}



def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_AUX = _words("is are was were do does did can could has have had will would should shall may might must")
_HEADS: tuple[tuple[AnswerType, frozenset[str]], ...] = (
    ("date", _words("year years date day month decade century time era age")),
    ("place", _words("city country state town county region location place island continent province "
                        "village capital district area river mountain lake nation borough neighborhood "
                        "neighbourhood street venue stadium")),
    ("number", _words("number percentage percent amount population")),
    ("org", _words("team company organization organisation band group university college school club party "
                      "network airline label agency firm corporation brand league franchise channel "
                      "newspaper magazine publisher studio institution")),
    ("work", _words("film movie album song book novel show series play game opera single episode "
                       "documentary poem painting")),
    ("person", _words("person man woman actor actress singer player author writer director president king "
                         "queen politician musician composer artist footballer coach producer")),
    ("norp", _words("nationality ethnicity religion")),
    ("language", frozenset({"language"})),
)
_OPTIONS = re.compile(r",\s*((?:the\s+)?[^,?]+?)\s+or\s+([^,?]+?)\s*\??\s*$", re.IGNORECASE)
_EARLY = re.compile(r"\b(first|earlier|earliest|older|oldest|before|prior)\b", re.IGNORECASE)
_LATE = re.compile(r"\b(later|latest|last|younger|youngest|newer|newest|more recent|most recent|after)\b",
                   re.IGNORECASE)
_MORE = re.compile(r"\b(more|most|larger|largest|bigger|biggest|taller|tallest|higher|highest|longer|longest|"
                   r"greater|greatest|heavier)\b", re.IGNORECASE)
_LESS = re.compile(r"\b(fewer|fewest|less|least|smaller|smallest|shorter|shortest|lower|lowest|lighter)\b",
                   re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class QuestionType:
    kind: AnswerType
    options: tuple[str, ...] = ()  # choice questions: the alternatives named in the question
    order: Literal["early", "late", "more", "less", ""] = ""  # choice questions: what decides

    @property
    def labels(self) -> frozenset[str]:
        return ENTITY_LABELS.get(self.kind, frozenset())


def _head_type(words: list[str]) -> AnswerType | None:
    """The type named by the first few words after a which/what (e.g. "what year", "which band")."""
    for w in words[:3]:
        for kind, heads in _HEADS:
            if w in heads or (w.endswith("s") and w[:-1] in heads):
                return kind
    return None


def _order(question: str) -> Literal["early", "late", "more", "less", ""]:
    for name, pattern in (("early", _EARLY), ("late", _LATE), ("less", _LESS), ("more", _MORE)):
        if pattern.search(question):
            return name  # type: ignore[return-value]
    return ""


_WH = frozenset({"what", "which", "who", "whom", "whose", "when", "where", "how"})
_PREP = _words("in on at for from by to of with during since under about into")


def _anchor(words: list[str]) -> int:
    """Position of the question's wh-word: sentence-initial, after a preposition ("in what city"), else the
    first `what`/`how`, else the first other wh-word (`who`, `which`, `where` are often relative pronouns)."""
    if words[0] in _WH:
        return 0
    for i in range(1, len(words)):
        if words[i] in _WH and words[i - 1] in _PREP:
            return i
    for group in ({"what", "how"}, _WH):
        for i, w in enumerate(words):
            if w in group:
                return i
    return -1


def question_type(question: str) -> QuestionType:
    q = question.strip()
    words = re.findall(r"[a-z0-9']+", q.lower())
    if not words:
        return QuestionType("other")
    m = _OPTIONS.search(q)
    if m and (words[0] in _WH or words[0] in _AUX or words[0] in _PREP):
        options = tuple(o.strip().strip("\"'“”") for o in m.groups())
        return QuestionType("choice", options, _order(q))
    if words[0] in _AUX:
        return QuestionType("yesno")
    i = _anchor(words)
    if i < 0:
        return QuestionType(_head_type(words) or "other") if "nationality" not in words else QuestionType("norp")
    wh, rest = words[i], words[i + 1:]
    if wh == "how":
        nxt = rest[0] if rest else ""
        if nxt in {"old", "long"}:
            return QuestionType("date" if nxt == "long" and "ago" not in rest else "number")
        return QuestionType("number")
    if wh in {"who", "whom", "whose"}:
        return QuestionType("person")
    if wh == "when":
        return QuestionType("date")
    if wh == "where":
        return QuestionType("place")
    kind = _head_type(rest)
    if kind:
        return QuestionType(kind)
    return QuestionType("norp" if "nationality" in words else "other")
