"""What the wording of a question says before anything is read: an either-or question's two options, and
whether it asks for yes or no."""

from __future__ import annotations

import re

_YESNO_START = re.compile(
    r"^\s*(is|are|was|were|do|does|did|can|could|has|have|had|will|would|should|shall|may|might|must)\b", re.I)
_WH_START = re.compile(r"^\s*(which|who|whom|whose|what|where|when|in which|of which|between)\b", re.I)
_OPTIONS = re.compile(r"[,:]\s*(?:the\s+)?([^,:?]+?)\s*,?\s+or\s+(?:the\s+)?([^,?]+?)\s*\??\s*$", re.I)
_OPTIONS_LOOSE = re.compile(r"\b(?:between\s+)?([A-Z][^,?]*?)\s+(?:or|and)\s+([A-Z][^,?]*?)\s*\??\s*$")
# "Was A or B born first?": an either-or question that opens like a yes/no one, two names then a comparative
_NAME = r"[A-Z0-9][\w'’.\-!]*(?:\s+(?:[A-Z0-9(][\w'’.\-()!]*|of|the|de|and|in|on))*"
_NAME_JOINERS = frozenset({"of", "the", "de", "and", "in", "on"})
_AUX_OPTIONS = re.compile(
    rf"^\s*(?i:was|were|is|are|did|does|do|has|have)\s+(?i:the\s+)?({_NAME})\s+or\s+(?i:the\s+)?({_NAME})"
    r"\s+(?:[a-z]\w*\s+){0,3}?(?:first|earlier|earliest|later|last|older|younger|longer|shorter|bigger|larger|"
    r"smaller|taller|higher|lower|more|fewer|less)\b[^,?]*\??\s*$")


def question_options(question: str) -> tuple[str, str] | None:
    """The two options of an either-or question ("Which is older, A or B?", "Was A or B born first?"), else None."""
    if _YESNO_START.match(question) and not _WH_START.match(question):
        m = _AUX_OPTIONS.match(question)
        return (_name_only(m.group(1)), _name_only(m.group(2))) if m is not None else None
    m = _OPTIONS.search(question)
    if m is None and _WH_START.match(question):
        m = _OPTIONS_LOOSE.search(question)
    if m is None:
        return None
    a, b = (s.strip(" \"'“”") for s in (m.group(1), m.group(2)))
    if not a or not b or len(a) > 80 or len(b) > 80:
        return None
    return a, b


def _name_only(text: str) -> str:
    """A name without the joining words a greedy match took after it ("Washington the" -> "Washington")."""
    words = text.split()
    while len(words) > 1 and words[-1] in _NAME_JOINERS:
        words.pop()
    return " ".join(words)


def is_yesno_question(question: str) -> bool:
    return bool(_YESNO_START.match(question)) and question_options(question) is None
