"""The sub-question a numeric comparison asks of each entity, when the question names what it measures.

"Which band has more members, A or B?" asks each band "How many members does {E} have?"; "Which peak stands higher,
A or B?" asks "How high is {E}?"; "Which city has the larger population, ...?" asks "What is the population of
{E}?". Without such a measure the tagger falls back on the sub-questions of the nearest training comparison,
which at a low cosine ask about something else ("What is the country of origin for {E}?" of a band's members).
"""

from __future__ import annotations

import re

# the counted noun may follow up to two modifiers: "more Grand Slam titles"
_COUNTED = re.compile(r"\b(?:more|most|fewer|fewest)\s+(?P<noun>(?:(?!than\b)[A-Za-z-]+\s+){0,2}"
                      r"(?:[a-z]+s|people|children|men|women|staff|personnel))\b(?!['’]|\s+than)")
_NUMBER_OF = re.compile(r"\b(?:larger|largest|greater|greatest|higher|highest|smaller|smallest|lower|lowest|bigger|"
                        r"biggest)\s+(?:number|count|amount)\s+of\s+(?P<noun>[a-z]+)\b", re.IGNORECASE)
_MEASURES = ("population", "elevation", "altitude", "area", "capacity", "height", "length", "budget", "revenue",
             "enrollment", "enrolment", "circulation", "attendance", "density", "depth", "width")
_MEASURED = re.compile(r"\b(?:larger|largest|greater|greatest|higher|highest|smaller|smallest|lower|lowest|bigger|"
                       rf"biggest|longer|longest)\s+(?P<noun>{'|'.join(_MEASURES)})\b", re.IGNORECASE)
_ADJECTIVES = {"taller": "tall", "tallest": "tall", "higher": "high", "highest": "high", "longer": "long",
               "longest": "long", "deeper": "deep", "deepest": "deep", "wider": "wide", "widest": "wide"}
_ADJECTIVE = re.compile(rf"\b(?P<adj>{'|'.join(_ADJECTIVES)})\b(?!\s+(?:than\b|number\b|[a-z]+s\b))", re.IGNORECASE)
_IRREGULAR_PLURALS = frozenset({"people", "children", "men", "women", "staff", "personnel"})
_NOT_COUNTED = ("ous", "ss", "us", "ly", "ful", "ive", "ent", "ant", "ic", "al", "able", "ible")


def _counted_noun(phrase: str) -> bool:
    w = phrase.split()[-1].lower()
    return w in _IRREGULAR_PLURALS or (w.endswith("s") and len(w) > 3 and not w.endswith(_NOT_COUNTED))


def measure_question(question: str) -> str | None:
    """The sub-question (with `{E}` for the entity) a numeric comparison asks of each entity, None when the
    question names no measure this module knows."""
    m = _NUMBER_OF.search(question)
    if m is not None and _counted_noun(m.group("noun")):
        return f"How many {m.group('noun').lower()} does {{E}} have?"
    m = _COUNTED.search(question)
    if m is not None and _counted_noun(m.group("noun")):
        return f"How many {m.group('noun')} does {{E}} have?"
    m = _MEASURED.search(question)
    if m is not None:
        return f"What is the {m.group('noun').lower()} of {{E}}?"
    m = _ADJECTIVE.search(question)
    if m is not None:
        return f"How {_ADJECTIVES[m.group('adj').lower()]} is {{E}}?"
    return None
