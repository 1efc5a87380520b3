"""Sentence-aware chunking of free text to a token budget of the embedding tokenizer.

Sentences come from a rule-based splitter that keeps abbreviations ("Mr.", "e.g.", "U.S."),
initials and decimals intact; blank lines are hard boundaries. Chunks are greedy runs of whole
sentences within `max_tokens`; each chunk after the first starts with whole trailing sentences of
the previous one, up to `overlap_tokens`. A sentence longer than the budget is split by words (a
single word longer than the budget at token boundaries). Chunk texts are slices of the source, so
their whitespace and line breaks are the source's own.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from amsrag.config import ChunkConfig

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


def _starts_sentence(char: str) -> bool:
    if char in _OPENERS or char.isdigit() or char.isupper():
        return True
    # Scripts without case (CJK, Arabic, ...) are neither upper nor lower.
    return char.isalpha() and not char.islower()


def _is_abbreviation(text: str, dot: int) -> bool:
    """Whether the "." at `dot` ends an abbreviation, an initial or a dotted acronym."""
    start = dot
    while start > 0 and not text[start - 1].isspace():
        start -= 1
    word = text[start : dot + 1].lstrip(_OPENERS)
    if _DOTTED.fullmatch(word) or _INITIAL.fullmatch(word):
        return True
    return word[:-1].lower() in _ABBREVIATIONS


def _is_boundary(text: str, match: re.Match[str]) -> bool:
    rest = text[match.end() :].lstrip()
    if not rest:
        return False
    punct = match.group().rstrip(_CLOSERS)
    if punct[-1] in _FULL_WIDTH_STOPS:
        return True
    if not _starts_sentence(rest[0]):
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


def _block_spans(text: str) -> list[Span]:
    spans, start = [], 0
    for m in _BLOCK_BREAK.finditer(text):
        spans.append((start, m.start()))
        start = m.end()
    spans.append((start, len(text)))
    return spans


def sentence_spans(text: str) -> list[Span]:
    """(start, end) character spans of the sentences of `text`, whitespace trimmed."""
    spans: list[Span] = []
    for block_start, block_end in _block_spans(text):
        block = text[block_start:block_end]
        start = 0
        for m in _CANDIDATE.finditer(block):
            if _is_boundary(block, m):
                span = _strip_span(text, block_start + start, block_start + m.end())
                if span:
                    spans.append(span)
                start = m.end()
        span = _strip_span(text, block_start + start, block_end)
        if span:
            spans.append(span)
    return spans


def split_sentences(text: str) -> list[str]:
    return [text[s:e] for s, e in sentence_spans(text)]


class TokenCounter:
    """Counts embedding-tokenizer tokens (no special tokens), past the tokenizer's truncation length."""

    def __init__(self, tokenizer: Any = None) -> None:
        if tokenizer is None:
            from amsrag.embed import load_tokenizer

            tokenizer = load_tokenizer(512)
        self._tokenizer = tokenizer

    def counts(self, texts: Sequence[str]) -> list[int]:
        if not texts:
            return []
        encodings = self._tokenizer.encode_batch(list(texts), add_special_tokens=False)
        return [len(e.ids) + sum(len(o.ids) for o in e.overflowing) for e in encodings]

    def count(self, text: str) -> int:
        return self.counts([text])[0]

    def token_offsets(self, text: str) -> list[Span]:
        enc = self._tokenizer.encode(text, add_special_tokens=False)
        offsets = list(enc.offsets)
        for overflow in enc.overflowing:
            offsets.extend(overflow.offsets)
        return offsets


@dataclass(frozen=True, slots=True)
class _Unit:
    start: int
    end: int
    tokens: int
    whole: bool  # a whole sentence (may be repeated as overlap), not a piece of a split one


def _pack(spans: Sequence[Span], counts: Sequence[int], budget: int) -> list[Span]:
    """Greedy runs of consecutive spans whose token counts sum to at most `budget`."""
    pieces: list[Span] = []
    start, end, total = -1, -1, 0
    for (s, e), n in zip(spans, counts, strict=True):
        if start >= 0 and total + n > budget:
            pieces.append((start, end))
            start, total = -1, 0
        if start < 0:
            start = s
        end, total = e, total + n
    if start >= 0:
        pieces.append((start, end))
    return pieces


def _split_word(text: str, start: int, end: int, budget: int, counter: TokenCounter) -> list[Span]:
    """A single word longer than the budget, cut at token boundaries (re-counted: sub-words can grow)."""
    offsets = [(start + s, start + e) for s, e in counter.token_offsets(text[start:end]) if e > s]
    pieces: list[Span] = []
    i = 0
    while i < len(offsets):
        take = min(budget, len(offsets) - i)
        while take > 1 and counter.count(text[offsets[i][0] : offsets[i + take - 1][1]]) > budget:
            take -= 1
        pieces.append((offsets[i][0], offsets[i + take - 1][1]))
        i += take
    return pieces


def _split_long(text: str, span: Span, budget: int, counter: TokenCounter) -> list[_Unit]:
    """A sentence longer than the budget, as word runs within the budget."""
    words = [(span[0] + m.start(), span[0] + m.end()) for m in re.finditer(r"\S+", text[span[0] : span[1]])]
    counts = counter.counts([text[s:e] for s, e in words])
    fitted: list[Span] = []
    fitted_counts: list[int] = []
    for (s, e), n in zip(words, counts, strict=True):
        parts = _split_word(text, s, e, budget, counter) if n > budget else [(s, e)]
        fitted.extend(parts)
        fitted_counts.extend(counter.counts([text[a:b] for a, b in parts]) if n > budget else [n])
    pieces = _pack(fitted, fitted_counts, budget)
    piece_counts = counter.counts([text[s:e] for s, e in pieces])
    return [_Unit(s, e, n, whole=False) for (s, e), n in zip(pieces, piece_counts, strict=True)]


def _units(text: str, budget: int, counter: TokenCounter) -> list[_Unit]:
    spans = sentence_spans(text)
    counts = counter.counts([text[s:e] for s, e in spans])
    units: list[_Unit] = []
    for span, n in zip(spans, counts, strict=True):
        if n > budget:
            units.extend(_split_long(text, span, budget, counter))
        else:
            units.append(_Unit(span[0], span[1], n, whole=True))
    return units


def _overlap_start(units: Sequence[_Unit], first: int, nxt: int, config: ChunkConfig) -> int:
    """Index where the chunk after units[first:nxt] starts: whole trailing sentences within the overlap."""
    start, overlap = nxt, 0
    while start - 1 > first:
        unit = units[start - 1]
        grown = overlap + unit.tokens
        if not unit.whole or grown > config.overlap_tokens or grown + units[nxt].tokens > config.max_tokens:
            break
        start, overlap = start - 1, grown
    return start


def chunk_spans(text: str, config: ChunkConfig, counter: TokenCounter | None = None) -> list[Span]:
    """Character spans of the chunks of `text`."""
    counter = counter or TokenCounter()
    units = _units(text, config.max_tokens, counter)
    chunks: list[Span] = []
    first = 0
    while first < len(units):
        nxt, total = first, 0
        while nxt < len(units) and (nxt == first or total + units[nxt].tokens <= config.max_tokens):
            total += units[nxt].tokens
            nxt += 1
        chunks.append((units[first].start, units[nxt - 1].end))
        if nxt >= len(units):
            break
        first = _overlap_start(units, first, nxt, config)
    return chunks


def chunk_text(text: str, config: ChunkConfig | None = None, counter: TokenCounter | None = None) -> list[str]:
    """The chunks of `text` (none for blank text)."""
    return [text[s:e] for s, e in chunk_spans(text, config or ChunkConfig(), counter)]
