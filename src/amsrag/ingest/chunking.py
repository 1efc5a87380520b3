"""Sentence-aware chunking of free text to a token budget of the embedding tokenizer.

Sentences come from a rule-based splitter that keeps abbreviations ("Mr.", "e.g.", "U.S."),
initials and decimals intact; blank lines are hard boundaries. Chunks are greedy runs of whole
sentences within `max_tokens`; each chunk after the first starts with whole trailing sentences of
the previous one, up to `overlap_tokens`. A sentence longer than the budget is split by words (a
single word longer than the budget at token boundaries). Chunk texts are slices of the source, so
their whitespace and line breaks are the source's own. Everything streams: the tokenizer sees bounded
windows of sentences, words or characters, never a whole over-long sentence or word (a 20 MB line
tokenized at once took 6 GB).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from amsrag.config import ChunkConfig
from amsrag.embed.tokens import TokenCounter
from amsrag.text.sentences import Span, iter_sentence_spans

_WORD = re.compile(r"\S+")
# What one tokenizer call sees: at most this many characters / texts (a longer single text alone).
WINDOW_CHARS = 1 << 16
WINDOW_ITEMS = 1024
# A sentence longer than this is split by words without being tokenized whole; a word longer than this
# is tokenized this many characters at a time.
LONG_SENTENCE_CHARS = 1 << 14
WORD_WINDOW_CHARS = 1 << 13
MAX_CHARS_PER_TOKEN = 32

@dataclass(frozen=True, slots=True)
class _Unit:
    start: int
    end: int
    tokens: int
    whole: bool  # a whole sentence (may be repeated as overlap), not a piece of a split one


def _windows(spans: Iterable[Span], max_chars: int, max_items: int) -> Iterator[list[Span]]:
    """Consecutive runs of `spans` holding at most `max_chars` characters (a longer span alone) and at
    most `max_items` spans: what one tokenizer call sees."""
    window: list[Span] = []
    chars = 0
    for s, e in spans:
        if window and (chars + e - s > max_chars or len(window) >= max_items):
            yield window
            window, chars = [], 0
        window.append((s, e))
        chars += e - s
    if window:
        yield window


def _weight(span: Span, tokens: int) -> int:
    """Tokens, or more for a span with more than MAX_CHARS_PER_TOKEN characters a token: a tokenizer maps
    a long run it cannot split to one unknown token, and a chunk of such runs would have no size bound."""
    return max(tokens, -(-(span[1] - span[0]) // MAX_CHARS_PER_TOKEN))


def _counted(text: str, spans: Iterable[Span], counter: TokenCounter) -> Iterator[tuple[Span, int]]:
    """(span, weight) of each span, its tokens counted a bounded window at a time."""
    for window in _windows(spans, WINDOW_CHARS, WINDOW_ITEMS):
        counts = counter.counts([text[s:e] for s, e in window])
        yield from ((span, _weight(span, n)) for span, n in zip(window, counts, strict=True))


def _split_word(text: str, start: int, end: int, budget: int, counter: TokenCounter) -> Iterator[Span]:
    """A single word longer than the budget, cut at token boundaries (re-counted: sub-words can grow).
    The word is tokenized `WORD_WINDOW_CHARS` characters at a time (a cut there may split a token)."""
    for w_start in range(start, end, WORD_WINDOW_CHARS):
        w_end = min(end, w_start + WORD_WINDOW_CHARS)
        offsets = [(a, min(a + MAX_CHARS_PER_TOKEN, w_start + e))
                   for s, e in counter.token_offsets(text[w_start:w_end]) if e > s
                   for a in range(w_start + s, w_start + e, MAX_CHARS_PER_TOKEN)]
        i = 0
        while i < len(offsets):
            take = min(budget, len(offsets) - i)
            while take > 1 and counter.count(text[offsets[i][0] : offsets[i + take - 1][1]]) > budget:
                take -= 1
            yield offsets[i][0], offsets[i + take - 1][1]
            i += take


def _fitted_words(text: str, span: Span, budget: int, counter: TokenCounter) -> Iterator[tuple[Span, int]]:
    """(span, tokens) of the words of a sentence, a word over the budget as its token-boundary pieces."""
    for run in _runs_by_length(_WORD.finditer(text, span[0], span[1]), WORD_WINDOW_CHARS):
        if len(run) == 1 and run[0][1] - run[0][0] > WORD_WINDOW_CHARS:  # not tokenized whole
            yield from _counted(text, _split_word(text, *run[0], budget, counter), counter)
            continue
        for (s, e), n in _counted(text, run, counter):
            if n <= budget:
                yield (s, e), n
            else:
                yield from _counted(text, _split_word(text, s, e, budget, counter), counter)


def _runs_by_length(matches: Iterable[re.Match[str]], max_chars: int) -> Iterator[list[Span]]:
    """Spans of consecutive matches, a match longer than `max_chars` as a run of its own."""
    run: list[Span] = []
    for m in matches:
        if m.end() - m.start() > max_chars:
            if run:
                yield run
                run = []
            yield [m.span()]
        else:
            run.append(m.span())
            if len(run) >= WINDOW_ITEMS:
                yield run
                run = []
    if run:
        yield run


def _split_long(text: str, span: Span, budget: int, counter: TokenCounter) -> Iterator[_Unit]:
    """A sentence longer than the budget, as word runs within the budget (streamed: a sentence may be
    the whole of a file without full stops)."""

    def pieces() -> Iterator[Span]:
        start, end, total = -1, -1, 0
        for (s, e), n in _fitted_words(text, span, budget, counter):
            if start >= 0 and total + n > budget:
                yield start, end
                start, total = -1, 0
            if start < 0:
                start = s
            end, total = e, total + n
        if start >= 0:
            yield start, end

    for (s, e), n in _counted(text, pieces(), counter):
        yield _Unit(s, e, n, whole=False)


def _units(text: str, budget: int, counter: TokenCounter) -> Iterator[_Unit]:
    # A sentence of more than LONG_SENTENCE_CHARS characters is not counted whole: it goes straight to
    # the word split, which packs it back into one piece if it fits after all.
    spans = iter_sentence_spans(text)
    for window in _windows(spans, WINDOW_CHARS, WINDOW_ITEMS):
        short = [(s, e) for s, e in window if e - s <= LONG_SENTENCE_CHARS]
        counts = {span: _weight(span, n) for span, n in zip(short, counter.counts([text[s:e] for s, e in short]),
                                                              strict=True)}
        for span in window:
            n = counts.get(span)
            if n is None or n > budget:
                yield from _split_long(text, span, budget, counter)
            else:
                yield _Unit(span[0], span[1], n, whole=True)


def _overlap(chunk: Sequence[_Unit], nxt: _Unit, config: ChunkConfig) -> list[_Unit]:
    """The units the chunk after `chunk` starts with: whole trailing sentences within the overlap (never
    the chunk's first unit, so chunks always move forward), leaving room for `nxt`."""
    start, overlap = len(chunk), 0
    while start - 1 > 0:
        unit = chunk[start - 1]
        grown = overlap + unit.tokens
        if not unit.whole or grown > config.overlap_tokens or grown + nxt.tokens > config.max_tokens:
            break
        start, overlap = start - 1, grown
    return list(chunk[start:])


class Packer:
    """Greedy runs of units within `max_tokens`, each after the first starting with the overlap: fed a unit at
    a time, it gives a chunk's span when the next unit does not fit (and the last one at `finish`)."""

    def __init__(self, config: ChunkConfig) -> None:
        self.config = config
        self.chunk: list[_Unit] = []
        self.total = 0

    @property
    def start(self) -> int | None:
        """Where the chunk being filled starts (None before the first unit): no earlier text is needed."""
        return self.chunk[0].start if self.chunk else None

    def add(self, unit: _Unit) -> Span | None:
        out = None
        if self.chunk and self.total + unit.tokens > self.config.max_tokens:
            out = self.chunk[0].start, self.chunk[-1].end
            self.chunk = _overlap(self.chunk, unit, self.config)
            self.total = sum(u.tokens for u in self.chunk)
        self.chunk.append(unit)
        self.total += unit.tokens
        return out

    def finish(self) -> Span | None:
        return (self.chunk[0].start, self.chunk[-1].end) if self.chunk else None


def iter_chunk_spans(text: str, config: ChunkConfig, counter: TokenCounter | None = None) -> Iterator[Span]:
    """Character spans of the chunks of `text`, as a stream: memory stays bounded by the tokenizer
    window and one chunk, whatever the length of the text or of its sentences."""
    counter = counter or TokenCounter()
    packer = Packer(config)
    for unit in _units(text, config.max_tokens, counter):
        span = packer.add(unit)
        if span is not None:
            yield span
    last = packer.finish()
    if last is not None:
        yield last


def chunk_spans(text: str, config: ChunkConfig, counter: TokenCounter | None = None) -> list[Span]:
    """Character spans of the chunks of `text`."""
    return list(iter_chunk_spans(text, config, counter))


def chunk_text(text: str, config: ChunkConfig | None = None, counter: TokenCounter | None = None) -> list[str]:
    """The chunks of `text` (none for blank text)."""
    return [text[s:e] for s, e in iter_chunk_spans(text, config or ChunkConfig(), counter)]


def iter_chunks(text: str, config: ChunkConfig | None = None, counter: TokenCounter | None = None) -> Iterator[str]:
    """The chunks of `text`, one at a time."""
    for s, e in iter_chunk_spans(text, config or ChunkConfig(), counter):
        yield text[s:e]
