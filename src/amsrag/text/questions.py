"""What the wording of a question says before anything is read: an either-or question's two options, whether it
asks for yes or no, whether it asks for an attribute rather than the entity it describes, and whether an answer
merely restates it."""

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


# a question whose answer is a place, a time, a quantity, a reason, a nationality or language, or part of a name:
# never the person or thing its description names ("the director of film X", "the Senator who ...")
_ASKS_ATTRIBUTE = re.compile(
    r"^\s*(?:where|when|why|how\s+(?:many|much|long|old|far|tall|big))\b"
    r"|\b(?:what|which)\s+(?:year|date|city|country|county|state|town|place|nationality|language)\b"
    r"|\b(?:birthplace|place\s+of\s+(?:birth|death)|date\s+of\s+(?:birth|death)|nationality|"
    r"(?:middle|first|last)\s+name)\b", re.I)


def asks_for_attribute(question: str) -> bool:
    """Whether the question asks for a place, a time, a quantity, a reason, a nationality or language, or a part of
    a name, so that the person or thing it describes is not its answer ("Where was the director of film X born?")."""
    return bool(_ASKS_ATTRIBUTE.search(question))


def restates_question(answer: str, question: str) -> bool:
    """Whether `answer` is written in the question itself: its words, in order, within the question's
    ("Barbie Girl" for 'Which group had a single called "Barbie Girl"?'); yes and no never are."""
    words, asked = re.findall(r"\w+", answer.lower()), re.findall(r"\w+", question.lower())
    if not words or words in (["yes"], ["no"]):
        return False
    n = len(words)
    return any(asked[i:i + n] == words for i in range(len(asked) - n + 1))
