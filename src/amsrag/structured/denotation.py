"""WikiTableQuestions' official answer comparison, re-implemented in Python 3 from its description.

A predicted answer is correct when its *set* of values equals the target set. Each string becomes a value:
a number when it parses as one ("1,000", "1000.0" and "1000" are the same value), a date when it has the
year-month-day form ("2004-05-12", "2004-xx-xx" or a written date such as "May 12, 2004"), otherwise its
normalised text. Normalisation: Unicode NFKD without combining marks, quotes and dashes unified, trailing
citation brackets ("[1]", "[a]") and a trailing parenthesis (" (2004)") removed, surrounding quotes
dropped, whitespace collapsed, lower case. Two values match when their normalised texts are equal, or
when both are numbers of equal amount (within 1e-6), or both are dates with the same (year, month, day).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

_QUOTES = str.maketrans({"‘": "'", "’": "'", "´": "'", "`": "'", "“": '"', "”": '"', "«": '"', "»": '"',
                         "‐": "-", "‑": "-", "‒": "-", "–": "-", "—": "-", "―": "-", "−": "-"})
_TRAILING_MARKS = re.compile(r"((?<!^)\[[^\]]*\]|\[\d+\]|[•♦†‡*#+])*$")
_TRAILING_PAREN = re.compile(r"(?<!^)( \([^)]*\))*$")
_QUOTED = re.compile(r'^"([^"]*)"$')
_NUMBER = re.compile(r"^[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)?(?:\.\d+)?$")
_ISO_DATE = re.compile(r"^(\d{4}|xx)-(\d{1,2}|xx)-(\d{1,2}|xx)$")
_MONTHS = {m: i + 1 for i, m in enumerate(("january", "february", "march", "april", "may", "june", "july",
                                           "august", "september", "october", "november", "december"))}
_MONTHS.update({m[:3]: i for m, i in list(_MONTHS.items())})
_MONTHS["sept"] = 9
_WRITTEN_DATE = re.compile(r"^(?:(\d{1,2}) ([a-z]+)\.?,? (\d{4})|([a-z]+)\.? (\d{1,2}),? (\d{4}))$")


def normalize(text: str) -> str:
    """The evaluator's string normalisation (see the module docstring)."""
    x = "".join(c for c in unicodedata.normalize("NFKD", str(text)) if not unicodedata.combining(c))
    x = x.translate(_QUOTES)
    while True:
        before = x
        x = _TRAILING_MARKS.sub("", x.strip())
        x = _TRAILING_PAREN.sub("", x.strip())
        x = x.strip()
        m = _QUOTED.match(x)
        if m:
            x = m.group(1)
        if x == before:
            break
    x = " ".join(x.split())
    return x.lower()


def parse_amount(normalized: str) -> float | None:
    """The number `normalized` is as a whole ("1,000" → 1000.0), else None."""
    if not normalized or normalized in {"+", "-", "."} or not _NUMBER.match(normalized):
        return None
    try:
        return float(normalized.replace(",", ""))
    except ValueError:
        return None


def parse_date(normalized: str) -> tuple[int, int, int] | None:
    """(year, month, day) with -1 for an unknown part, for the ISO form and written dates; else None."""
    m = _ISO_DATE.match(normalized)
    if m:
        y, mo, d = (-1 if g == "xx" else int(g) for g in m.groups() if g is not None)
        if (y, mo, d) == (-1, -1, -1) or not (mo == -1 or 1 <= mo <= 12) or not (d == -1 or 1 <= d <= 31):
            return None
        return y, mo, d
    m = _WRITTEN_DATE.match(normalized)
    if m:
        day, month, year = (m.group(1), m.group(2), m.group(3)) if m.group(1) else (m.group(5), m.group(4), m.group(6))
        month_number = _MONTHS.get(month)
        if month_number is not None and 1 <= int(day) <= 31:
            return int(year), month_number, int(day)
    return None


@dataclass(frozen=True, slots=True)
class Value:
    normalized: str
    amount: float | None = None
    date: tuple[int, int, int] | None = None

    def matches(self, other: Value) -> bool:
        if self.normalized == other.normalized:
            return True
        if self.amount is not None and other.amount is not None:
            return abs(self.amount - other.amount) < 1e-6
        return self.date is not None and self.date == other.date


def to_value(text: str) -> Value:
    n = normalize(text)
    amount = parse_amount(n)
    if amount is not None:
        return Value(n, amount=amount)
    return Value(n, date=parse_date(n))


def to_values(texts: Sequence[str]) -> list[Value]:
    """The distinct values of `texts` (duplicates by normalised text collapse, as in a set)."""
    seen: dict[str, Value] = {}
    for t in texts:
        v = to_value(t)
        seen.setdefault(v.normalized, v)
    return list(seen.values())


def values_match(predicted: Sequence[Value], target: Sequence[Value]) -> bool:
    if len(predicted) != len(target):
        return False
    return all(any(t.matches(p) for p in predicted) for t in target)


def denotation_match(predicted: Sequence[str], target: Sequence[str]) -> bool:
    """True when the predicted answer set equals the target set under the evaluator's value matching."""
    return values_match(to_values(predicted), to_values(target))


def split_target(target_value: str) -> list[str]:
    """WTQ's `targetValue` field: answers separated by `|` (with `\\p`, `\\n`, `\\\\` escapes)."""
    parts = target_value.split("|")
    return [p.replace("\\p", "|").replace("\\n", "\n").replace("\\\\", "\\") for p in parts]
