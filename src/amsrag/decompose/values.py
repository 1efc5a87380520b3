"""Typed values read from answers, and the comparison operators applied to them deterministically.

Dates keep their precision ("1956" is a year, "June 1956" a month): two dates compare on the precision both
have, and a tie at that precision is no answer. Numbers keep a unit scale ("3.5 million", "1,200 km").
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from amsrag.decompose.plan import Operator

MONTHS = {m: i + 1 for i, m in enumerate(
    ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
     "november", "december"))}
MONTHS.update({m[:3]: i for m, i in list(MONTHS.items())})
_MONTH = r"(jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sept?(?:ember)?|" \
         r"oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"
_YEAR = r"(\d{3,4})(?:\s*(bc|bce|b\.c\.))?"
_DMY = re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH},?\s+{_YEAR}\b", re.I)
_MDY = re.compile(rf"\b{_MONTH}\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+{_YEAR}\b", re.I)
_MY = re.compile(rf"\b{_MONTH},?\s+{_YEAR}\b", re.I)
_ISO = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
_Y = re.compile(rf"(?<![\d,.])\b{_YEAR}\b", re.I)
_NUMBER = re.compile(r"(?<![\w.])(-?\d[\d,]*(?:\.\d+)?|\.\d+)\s*(thousand|million|billion|trillion|k|m|bn)?\b", re.I)
_SCALE = {"thousand": 1e3, "k": 1e3, "million": 1e6, "m": 1e6, "billion": 1e9, "bn": 1e9, "trillion": 1e12}
_WORD_NUMBERS = {w: i for i, w in enumerate(
    ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"))}


@dataclass(frozen=True, slots=True, order=True)
class PartialDate:
    """A date known to the year, the month or the day (`month`/`day` 0 when unknown); BC years are negative."""

    year: int
    month: int = 0
    day: int = 0

    @property
    def precision(self) -> int:
        return 3 if self.day else 2 if self.month else 1

    def key(self, precision: int) -> tuple[int, ...]:
        return (self.year, self.month, self.day)[:precision]


def _year(text: str, era: str | None) -> int:
    y = int(text)
    return -y if era else y


def parse_date(text: str) -> PartialDate | None:
    """The first date in `text` at the finest precision written there, else None."""
    best: tuple[int, PartialDate] | None = None
    for m in _DMY.finditer(text):
        d = PartialDate(_year(m.group(3), m.group(4)), MONTHS[m.group(2).lower()[:3]], int(m.group(1)))
        best = _earliest(best, m.start(), d)
    for m in _MDY.finditer(text):
        d = PartialDate(_year(m.group(3), m.group(4)), MONTHS[m.group(1).lower()[:3]], int(m.group(2)))
        best = _earliest(best, m.start(), d)
    for m in _ISO.finditer(text):
        best = _earliest(best, m.start(), PartialDate(int(m.group(1)), int(m.group(2)), int(m.group(3))))
    if best is None:
        for m in _MY.finditer(text):
            month = MONTHS[m.group(1).lower()[:3]]
            best = _earliest(best, m.start(), PartialDate(_year(m.group(2), m.group(3)), month))
    if best is None:
        for m in _Y.finditer(text):
            y = int(m.group(1))
            if 100 <= y <= 2100:
                best = _earliest(best, m.start(), PartialDate(_year(m.group(1), m.group(2))))
    if best is None:
        return None
    d = best[1]
    if (not 1 <= d.month <= 12 and d.month != 0) or not 0 <= d.day <= 31:
        return None
    return d


def _earliest(best: tuple[int, PartialDate] | None, at: int, d: PartialDate) -> tuple[int, PartialDate]:
    return (at, d) if best is None or at < best[0] else best


def parse_number(text: str) -> float | None:
    """The first number in `text` with its scale word ("3.5 million" -> 3.5e6), a small number word, else None."""
    m = _NUMBER.search(text)
    if m is not None:
        try:
            value = float(m.group(1).replace(",", ""))
        except ValueError:
            return None
        scale = (m.group(2) or "").lower()
        return value * _SCALE.get(scale, 1.0)
    for word in re.findall(r"[a-z]+", text.lower()):
        if word in _WORD_NUMBERS:
            return float(_WORD_NUMBERS[word])
    return None


def normalise_text_value(text: str) -> str:
    words = re.sub(r"[^\w\s]", " ", text.lower()).split()
    return " ".join(w for w in words if w not in ("the", "a", "an", "of"))


DEMONYMS = {"american": "united states", "usa": "united states", "us": "united states", "u s": "united states",
             "united states of america": "united states", "british": "united kingdom", "english": "england",
             "uk": "united kingdom", "french": "france", "german": "germany", "italian": "italy",
             "canadian": "canada", "australian": "australia", "indian": "india", "chinese": "china",
             "japanese": "japan", "russian": "russia", "spanish": "spain", "mexican": "mexico",
             "irish": "ireland", "scottish": "scotland", "swedish": "sweden", "dutch": "netherlands",
             "polish": "poland", "brazilian": "brazil", "korean": "korea", "south korean": "south korea",
             "new zealand": "new zealand", "danish": "denmark", "norwegian": "norway", "finnish": "finland",
             "austrian": "austria", "swiss": "switzerland", "belgian": "belgium", "greek": "greece",
             "turkish": "turkey", "iranian": "iran", "egyptian": "egypt", "argentine": "argentina",
             "argentinian": "argentina", "filipino": "philippines", "soviet": "soviet union"}


def same_text_value(a: str, b: str) -> bool:
    """Two place/nationality/name values name the same thing (demonyms and country names are one value)."""
    x, y = normalise_text_value(a), normalise_text_value(b)
    x, y = DEMONYMS.get(x, x), DEMONYMS.get(y, y)
    return bool(x) and (x == y or x in y.split() or y in x.split())


@dataclass(frozen=True, slots=True)
class Decision:
    """The operator's outcome: the winning entity's index (options) or yes/no, or why there is none."""

    winner: int | None = None
    yes: bool | None = None
    reason: str = ""


def compare(operator: Operator, values: list[str]) -> Decision:
    """Apply `operator` to the answers read for each entity (as written in the evidence)."""
    if operator in ("earlier", "later"):
        dates = [parse_date(v) for v in values]
        if any(d is None for d in dates):
            bad = [repr(v) for v, d in zip(values, dates, strict=True) if d is None]
            return Decision(reason="a value is not a date: " + ", ".join(bad))
        known = [d for d in dates if d is not None]
        precision = min(d.precision for d in known)
        keys = [d.key(precision) for d in known]
        pick = min if operator == "earlier" else max
        best = pick(keys)
        if keys.count(best) > 1:
            return Decision(reason="the dates are equal at the precision both have")
        return Decision(winner=keys.index(best))
    if operator in ("more", "less"):
        numbers = [parse_number(v) for v in values]
        if any(n is None for n in numbers):
            return Decision(reason="a value is not a number")
        known_n = [n for n in numbers if n is not None]
        best_n = (max if operator == "more" else min)(known_n)
        if known_n.count(best_n) > 1:
            return Decision(reason="the numbers are equal")
        return Decision(winner=known_n.index(best_n))
    if operator in ("same", "different"):
        same = all(same_text_value(values[0], v) for v in values[1:])
        return Decision(yes=same if operator == "same" else not same)
    # both: every value is a yes
    answers = [v.strip().lower() for v in values]
    if any(a not in ("yes", "no") for a in answers):
        return Decision(reason="a check did not answer yes or no")
    return Decision(yes=all(a == "yes" for a in answers))
