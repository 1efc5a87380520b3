"""What the wording of a question says before anything is read: an either-or question's two options, and
whether it asks for yes or no."""

from __future__ import annotations

import re

_YESNO_START = re.compile(
    r"^\s*(is|are|was|were|do|does|did|can|could|has|have|had|will|would|should|shall|may|might|must)\b", re.I)
_WH_START = re.compile(r"^\s*(which|who|whom|whose|what|where|when|in which|of which|between)\b", re.I)
_OPTIONS = re.compile(r"[,:]\s*(?:the\s+)?([^,:?]+?)\s*,?\s+or\s+(?:the\s+)?([^,?]+?)\s*\??\s*$", re.I)
_OPTIONS_LOOSE = re.compile(r"\b(?:between\s+)?([A-Z][^,?]*?)\s+(?:or|and)\s+([A-Z][^,?]*?)\s*\??\s*$")


def question_options(question: str) -> tuple[str, str] | None:
    """The two options of an either-or question ("Which is older, A or B?"), else None."""
    if _YESNO_START.match(question) and not _WH_START.match(question):
        return None
    m = _OPTIONS.search(question)
    if m is None and _WH_START.match(question):
        m = _OPTIONS_LOOSE.search(question)
    if m is None:
        return None
    a, b = (s.strip(" \"'“”") for s in (m.group(1), m.group(2)))
    if not a or not b or len(a) > 80 or len(b) > 80:
        return None
    return a, b


def is_yesno_question(question: str) -> bool:
    return bool(_YESNO_START.match(question)) and question_options(question) is None
