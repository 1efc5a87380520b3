"""Rule-based sentence splitting: abbreviations ("Mr.", "e.g.", "U.S."), initials and decimals stay intact,
blank lines are hard boundaries, and full-width stops end Chinese sentences. Spans are character offsets."""

from __future__ import annotations

import re
from collections.abc import Iterator

Span = tuple[int, int]

# Words that end with "." without ending a sentence (lower-cased, without the dot).
# fmt: off
_ABBREVIATIONS = frozenset(
    (
        "mr", "mrs", "ms", "mx", "dr", "prof", "sr", "jr", "st", "mt", "ft", "messrs", "mme", "mlle",
        "rev", "hon", "gov", "sen", "rep", "pres", "supt", "gen", "col", "lt", "sgt", "capt", "cmdr",
        "adm", "maj", "brig", "cpl", "pvt", "insp", "det", "vs", "v", "cf", "al", "approx", "est", "ca",
        "c", "b", "d", "fl", "no", "nos", "nr", "vol", "vols", "pp", "p", "para", "ch", "sec", "fig",
        "figs", "eq", "eqs", "inc", "ltd", "co", "corp", "bros", "assn", "dept", "univ", "ave", "blvd",
        "rd", "hwy", "ed", "eds", "op", "repr", "trans", "jan", "feb", "mar", "apr", "jun", "jul",
        "aug", "sep", "sept", "oct", "nov", "dec",
    )
)
# fmt: on
_OPENERS = "\"'“‘([{«"
_CLOSERS = "\"'”’)]}»」』）"
_CANDIDATE = re.compile(rf"[.!?…]+[{re.escape(_CLOSERS)}]*(?=\s)|[。！？]+[{re.escape(_CLOSERS)}]*")
_FULL_WIDTH_STOPS = frozenset("。！？")
_DOTTED = re.compile(r"(?:[^\W\d_]\.){2,}")
_INITIAL = re.compile(r"[^\W\d_]\.")
_BLOCK_BREAK = re.compile(r"\n[ \t]*\n\s*")
_NON_SPACE = re.compile(r"\S")
_WORD_LOOKBACK = 64


def _starts_sentence(char: str) -> bool:
    if char in _OPENERS or char.isdigit() or char.isupper():
        return True
    # Scripts without case (CJK, Arabic, ...) are neither upper nor lower.
    return char.isalpha() and not char.islower()


def _is_abbreviation(text: str, dot: int) -> bool:
    """Whether the "." at `dot` ends an abbreviation, an initial or a dotted acronym."""
    start = dot
    floor = max(0, dot - _WORD_LOOKBACK)  # abbreviations are short: a long run without spaces is none
    while start > floor and not text[start - 1].isspace():
        start -= 1
    word = text[start : dot + 1].lstrip(_OPENERS)
    if _DOTTED.fullmatch(word) or _INITIAL.fullmatch(word):
        return True
    return word[:-1].lower() in _ABBREVIATIONS


def _is_boundary(text: str, match: re.Match[str], end: int) -> bool:
    nxt = _NON_SPACE.search(text, match.end(), end)
    if nxt is None:
        return False
    punct = match.group().rstrip(_CLOSERS)
    if punct[-1] in _FULL_WIDTH_STOPS:
        return True
    if not _starts_sentence(nxt.group()):
        return False
    if punct != ".":
        return True
    return not _is_abbreviation(text, match.start())


def _strip_span(text: str, start: int, end: int) -> Span | None:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return (start, end) if start < end else None


def _block_spans(text: str) -> Iterator[Span]:
    start = 0
    for m in _BLOCK_BREAK.finditer(text):
        yield start, m.start()
        start = m.end()
    yield start, len(text)


def iter_sentence_spans(text: str) -> Iterator[Span]:
    """(start, end) character spans of the sentences of `text`, whitespace trimmed, as a stream (the
    text is scanned in place: no copy of a block or of the rest of the text per candidate stop)."""
    for block_start, block_end in _block_spans(text):
        start = block_start
        for m in _CANDIDATE.finditer(text, block_start, block_end):
            if _is_boundary(text, m, block_end):
                span = _strip_span(text, start, m.end())
                if span:
                    yield span
                start = m.end()
        span = _strip_span(text, start, block_end)
        if span:
            yield span


def sentence_spans(text: str) -> list[Span]:
    """(start, end) character spans of the sentences of `text`, whitespace trimmed."""
    return list(iter_sentence_spans(text))


def split_sentences(text: str) -> list[str]:
    return [text[s:e] for s, e in sentence_spans(text)]
