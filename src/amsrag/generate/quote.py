"""The supporting sentence of an answer: the sentence of the passage that holds the answer span.

Sentences are the chunker's (`sentence_spans`), further cut where a line starts a list item, a table row,
a heading or a "Name: " definition: documentation writes "* Default: `30`" and "| `full` | Indexes …" one per
line without a full stop, and a quote should be that line, not the whole list.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from amsrag.generate.base import EvidencePassage, Quote
from amsrag.generate.metrics import normalize_answer
from amsrag.text.sentences import sentence_spans

_LINE_START = re.compile(r"\n[ \t]*(?=[-*+•|#>]\s|\d{1,3}[.)]\s|\||-{0,2}[A-Za-z][\w .-]{0,40}:\s"
                         r"|[\w.-]+[ \t]*=[ \t]|\[[\w.-]+\])")
MAX_QUOTE_CHARS = 600  # a "sentence" longer than this (a code block, a table without breaks) is cut around the span


def quote_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of the quotable sentences of `text`: sentences, cut again at list items, rows, headings."""
    out: list[tuple[int, int]] = []
    for s, e in sentence_spans(text):
        start = s
        for m in _LINE_START.finditer(text, s, e):
            piece = text[start:m.start()].strip()
            if piece:
                a = text.index(piece, start)
                out.append((a, a + len(piece)))
            start = m.end()
        piece = text[start:e].strip()
        if piece:
            a = text.index(piece, start)
            out.append((a, a + len(piece)))
    return out


def head_length(title: str) -> int:
    """Characters of "title: " that `context_of` puts before a passage's text (0 without a title)."""
    title = title.strip()
    return len(title) + 2 if title else 0


def quote_at(title: str, text: str, start: int, end: int, passage_id: str) -> Quote | None:
    """The quote of the span [start, end) of `context_of(title, text)`: the sentence(s) of `text` it lies in,
    or the title when the span is in the title. None for an empty or out-of-range span."""
    head = head_length(title)
    if end <= start:
        return None
    if start < head:
        t = title.strip()
        if end > len(t):
            return None
        return Quote(t, start, end, passage_id)
    a, b = start - head, end - head
    if b > len(text):
        return None
    spans = [(s, e) for s, e in quote_spans(text) if e > a and s < b]
    if not spans:
        return None
    s0, e0 = spans[0][0], spans[-1][1]
    s0, e0 = min(s0, a), max(e0, b)
    if e0 - s0 > MAX_QUOTE_CHARS:  # cut around the span, at white space
        room = max(0, (MAX_QUOTE_CHARS - (b - a)) // 2)
        lo, hi = max(s0, a - room), min(e0, b + room)
        cut = text.find(" ", lo, a)
        lo = cut + 1 if lo > s0 and cut >= 0 else lo
        cut = text.rfind(" ", b, hi)
        hi = cut if hi < e0 and cut >= 0 else hi
        s0, e0 = lo, hi
    return Quote(text[s0:e0], a - s0, b - s0, passage_id)


def sentence_at(title: str, text: str, start: int, end: int) -> tuple[int, int] | None:
    """The (start, end) in `context_of(title, text)` of the quote sentence around the span (None as `quote_at`)."""
    q = quote_at(title, text, start, end, "")
    if q is None:
        return None
    head = head_length(title)
    if start < head:
        return 0, len(title.strip())
    s0 = start - q.start
    return s0, s0 + len(q.text)


def find_quote(answer: str, passages: Sequence[EvidencePassage], cited: Sequence[str] = ()) -> Quote | None:
    """The first sentence of a cited passage (else of any passage) that holds `answer` as whole words (an
    LLM's answer, which says nothing of where it read it); None when no sentence does."""
    words = answer.split()
    if not words or not normalize_answer(answer):
        return None
    pattern = re.compile(r"(?<!\w)" + r"\s+".join(re.escape(w) for w in words) + r"(?!\w)", re.I)
    order = [p for c in cited for p in passages if p.id == c] + [p for p in passages if p.id not in cited]
    for p in order:
        m = pattern.search(p.text)
        if m is not None:
            head = head_length(p.title)
            return quote_at(p.title, p.text, m.start() + head, m.end() + head, p.id)
    return None
