"""Chunking a text that arrives as a stream of windows (a large file read a block at a time): the chunks
`chunking.iter_chunk_spans` makes of the whole text, span for span, while only a bounded tail of the text
is held.

The text read so far is one buffer. Sentences come from `SentenceScanner` as soon as the buffer decides them;
short ones are counted a window at a time, as the whole-text chunker counts them; an over-long one is split
by words as its words arrive (a file without a full stop is one sentence), so neither waits for the end of
the file. The buffer drops what no one needs: the text before the chunk being filled, the sentences waiting
to be counted, the pieces of a long sentence, and what the scanner reads again.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from amsrag.config import ChunkConfig
from amsrag.embed.tokens import TokenCounter
from amsrag.ingest.chunking import (
    LONG_SENTENCE_CHARS,
    WINDOW_CHARS,
    WINDOW_ITEMS,
    Packer,
    _fitted_words,
    _split_long,
    _Unit,
    _weight,
)
from amsrag.text.sentence_stream import SentenceScanner
from amsrag.text.sentences import Span

_PIECE_BATCH = 64  # pieces of a long sentence counted per tokenizer call


class _Buffer:
    """The text read so far from `base` on."""

    def __init__(self, windows: Iterable[str]) -> None:
        self._source = iter(windows)
        self.text = ""
        self.base = 0

    def more(self) -> bool:
        """Append the next window; False at the end of the stream."""
        for window in self._source:
            if window:
                self.text += window
                return True
        return False

    def slice(self, start: int, end: int) -> str:
        return self.text[start - self.base : end - self.base]

    def drop_before(self, offset: int) -> None:
        """Forget the text before `offset` (once that is at least half the buffer: each character is copied
        a bounded number of times)."""
        cut = offset - self.base
        if cut > 0 and cut * 2 >= len(self.text):
            self.text = self.text[cut:]
            self.base = offset


class _LongSentence:
    """`chunking._split_long` of a sentence whose words are still arriving: the same greedy word runs within
    the budget, each counted as a unit."""

    def __init__(self, first: int, budget: int, counter: TokenCounter) -> None:
        self.budget, self.counter = budget, counter
        self.word_pos = first  # the words before here are in runs
        self.start, self.end, self.total = -1, -1, 0  # the run being filled
        self.pieces: list[Span] = []  # runs waiting to be counted

    def needed_from(self) -> int:
        held = [p[0] for p in self.pieces[:1]] + ([self.start] if self.start >= 0 else [])
        return min([self.word_pos, *held])

    def advance(self, buf: _Buffer, settled: int) -> Iterator[_Unit]:
        """Take in the words that end before `settled` (the text before it belongs to the sentence)."""
        text, base = buf.text, buf.base
        j = settled - base
        lo = self.word_pos - base
        while j > lo and not text[j - 1].isspace():  # a word running up to `settled` may go on
            j -= 1
        yield from self._words(buf, j + base)

    def finish(self, buf: _Buffer, end: int) -> Iterator[_Unit]:
        """The sentence ends at `end`: its last words and runs."""
        yield from self._words(buf, end)
        if self.start >= 0:
            self.pieces.append((self.start, self.end))
            self.start = -1
        yield from self._count(buf)

    def _words(self, buf: _Buffer, upto: int) -> Iterator[_Unit]:
        if upto <= self.word_pos:
            return
        base = buf.base
        for (s, e), n in _fitted_words(buf.text, (self.word_pos - base, upto - base), self.budget, self.counter):
            if self.start >= 0 and self.total + n > self.budget:
                self.pieces.append((self.start, self.end))
                self.start, self.total = -1, 0
                if len(self.pieces) >= _PIECE_BATCH:
                    yield from self._count(buf)
            if self.start < 0:
                self.start = base + s
            self.end, self.total = base + e, self.total + n
        self.word_pos = upto

    def _count(self, buf: _Buffer) -> Iterator[_Unit]:
        counts = self.counter.counts([buf.slice(s, e) for s, e in self.pieces])
        for span, n in zip(self.pieces, counts, strict=True):
            yield _Unit(span[0], span[1], _weight(span, n), whole=False)
        self.pieces = []


class _Units:
    """The units (`chunking._units`) of the streamed text, in order."""

    def __init__(self, buf: _Buffer, budget: int, counter: TokenCounter) -> None:
        self.buf, self.budget, self.counter = buf, budget, counter
        self.scanner = SentenceScanner()
        self.pending: list[Span] = []  # short sentences waiting to be counted
        self.pending_chars = 0
        self.long: _LongSentence | None = None

    def needed_from(self) -> int:
        needed = [self.scanner.needed_from(), *(p[0] for p in self.pending[:1])]
        if self.long is not None:
            needed.append(self.long.needed_from())
        return min(needed)

    def __iter__(self) -> Iterator[_Unit | None]:
        """The units in order, and None after each window (the caller may drop text then)."""
        buf = self.buf
        while True:
            eof = not buf.more()
            for s, e in self.scanner.spans(buf.text, buf.base, eof):
                yield from self._sentence(s, e)
            if eof:
                yield from self._flush()
                return
            yield from self._open_sentence()
            yield None

    def _sentence(self, s: int, e: int) -> Iterator[_Unit]:
        if self.long is not None:
            long, self.long = self.long, None
            yield from long.finish(self.buf, e)
        elif e - s > LONG_SENTENCE_CHARS:
            yield from self._flush()
            yield from self._split(s, e)
        else:
            self.pending.append((s, e))
            self.pending_chars += e - s
            if len(self.pending) >= WINDOW_ITEMS or self.pending_chars >= WINDOW_CHARS:
                yield from self._flush()

    def _split(self, s: int, e: int) -> Iterator[_Unit]:
        base = self.buf.base
        for u in _split_long(self.buf.text, (s - base, e - base), self.budget, self.counter):
            yield _Unit(base + u.start, base + u.end, u.tokens, u.whole)

    def _flush(self) -> Iterator[_Unit]:
        if not self.pending:
            return
        pending, self.pending, self.pending_chars = self.pending, [], 0
        counts = self.counter.counts([self.buf.slice(s, e) for s, e in pending])
        for span, n in zip(pending, counts, strict=True):
            weight = _weight(span, n)
            if weight > self.budget:
                yield from self._split(*span)
            else:
                yield _Unit(span[0], span[1], weight, whole=True)

    def _open_sentence(self) -> Iterator[_Unit]:
        """The sentence in progress, split by words as they come once it is known to be over-long."""
        start, settled = self.scanner.open_sentence()
        text, base = self.buf.text, self.buf.base
        if self.long is None:
            first = start - base
            while first < settled - base and text[first].isspace():
                first += 1
            last = settled - base
            while last > first and text[last - 1].isspace():
                last -= 1
            if last - first <= LONG_SENTENCE_CHARS:
                return
            yield from self._flush()
            self.long = _LongSentence(base + first, self.budget, self.counter)
            self.scanner.hold_from(base + first)
        yield from self.long.advance(self.buf, settled)


def iter_stream_chunks(windows: Iterable[str], config: ChunkConfig,
                       counter: TokenCounter | None = None) -> Iterator[tuple[Span, str]]:
    """(span, text) of the chunks of the text `windows` make when joined: `chunking.iter_chunk_spans` of that
    text, while the text held stays bounded (by a window, a chunk and the tokenizer's batch, not by the
    stream's length; a single word or whitespace run is held whole)."""
    buf = _Buffer(windows)
    packer = Packer(config)
    units = _Units(buf, config.max_tokens, counter or TokenCounter())
    for unit in units:
        if unit is None:
            held = [units.needed_from(), *([packer.start] if packer.start is not None else [])]
            buf.drop_before(min(held))
            continue
        span = packer.add(unit)
        if span is not None:
            yield span, buf.slice(*span)
    last = packer.finish()
    if last is not None:
        yield last, buf.slice(*last)
