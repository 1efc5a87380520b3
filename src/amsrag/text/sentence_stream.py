"""Sentence spans of a text that arrives as a stream of windows: the spans `sentences.iter_sentence_spans`
gives for the whole text, each given as soon as the text read so far decides it.

A decision of the splitter needs only a bounded view: a block break (a blank line) is decided once a
character that is not whitespace follows it; a candidate stop once the run of stops and closing quotes has
ended inside the text read and, when it is not a full-width stop, the next character that is not whitespace
has been read (or the block has ended); an abbreviation looks back at most `_WORD_LOOKBACK` characters. The
scanner keeps where it stands (block, sentence, scan position) in offsets of the whole stream, so the caller
can drop the text before `needed_from()`.
"""

from __future__ import annotations

import re
from collections.abc import Generator, Iterator

from amsrag.text.sentences import (
    _BLOCK_BREAK,
    _CANDIDATE,
    _CLOSERS,
    _NON_SPACE,
    _WORD_LOOKBACK,
    Span,
    _is_boundary,
    _strip_span,
)

_STOP_RUN = frozenset(".!?…。！？" + _CLOSERS)  # what a candidate stop is made of
_TRAILING_NEWLINE = re.compile(r"\n[ \t]*\Z")


class SentenceScanner:
    """Feed it the text read so far (`spans`), again after each new window; it gives each sentence once."""

    def __init__(self) -> None:
        self.block_end: int | None = None  # the start of the break that ends the block, once found
        self.break_end: int | None = None  # where that break ends (the next block starts), once decided
        self.last_block = False  # the block runs to the end of the text
        self.tail = False  # the block's sentences are all given; the next block's start is awaited
        self.break_from = 0  # no block break starts between the block's start and here
        self.sent_start = 0  # where the sentence in progress starts (whitespace not yet trimmed)
        self.scan = 0  # candidate stops before here are decided
        self.first: int | None = None  # the sentence's first character, when the caller holds its head

    def needed_from(self) -> int:
        """The first offset of the stream the scanner will read again."""
        if self.tail:
            return self.block_end if self.block_end is not None else self.scan
        needed = min(self.scan - _WORD_LOOKBACK - 1, self.break_from)
        return needed if self.first is not None else min(needed, self.sent_start)

    def open_sentence(self) -> Span:
        """(start, settled) of the sentence in progress: the text in between belongs to it (none between
        blocks)."""
        if self.tail:
            at = self.needed_from()
            return at, at
        settled = self.scan if self.block_end is None else min(self.scan, self.block_end)
        return self.sent_start, max(self.sent_start, settled)

    def hold_from(self, first: int) -> None:
        """The caller keeps the head of the sentence in progress, whose first character is at `first`: the
        scanner no longer needs the text before its scan position."""
        self.first = first

    def spans(self, text: str, base: int, eof: bool) -> Iterator[Span]:
        """The sentences `text` (the stream from offset `base` on, holding all from `needed_from()` on)
        decides and that were not given before; `eof`: nothing follows."""
        while True:
            if not self.tail:
                if not (yield from self._block(text, base, eof)):
                    return
                self.tail = True
            if self.last_block:
                return
            if self.break_end is None:
                m = _BLOCK_BREAK.match(text, self._local(self.block_end, base))
                if m is None:  # unreachable: the break was found at block_end
                    raise AssertionError("block break lost")
                if m.end() == len(text) and not eof:
                    return
                self.break_end = base + m.end()
            start = self.break_end
            self.block_end = self.break_end = None
            self.tail = False
            self.break_from = self.sent_start = self.scan = start
            self.first = None

    @staticmethod
    def _local(offset: int | None, base: int) -> int:
        if offset is None or offset < base:
            raise AssertionError(f"offset {offset} is no longer held (the text starts at {base})")
        return offset - base

    def _find_break(self, text: str, base: int, eof: bool) -> None:
        m = _BLOCK_BREAK.search(text, self._local(self.break_from, base))
        if m is not None:
            self.block_end = base + m.start()
            if m.end() < len(text) or eof:
                self.break_end = base + m.end()
        elif eof:
            self.block_end, self.last_block = base + len(text), True
        else:  # a break can only start at a newline the text ends in
            t = _TRAILING_NEWLINE.search(text, self._local(self.break_from, base))
            self.break_from = base + (t.start() if t is not None else len(text))

    def _block(self, text: str, base: int, eof: bool) -> Generator[Span, None, bool]:
        """The sentences of the current block; returns True once its last one is given, False when more text
        is needed first."""
        if self.block_end is None:
            self._find_break(text, base, eof)
        stop = len(text) if self.block_end is None else self._local(self.block_end, base)
        decided_end = self.block_end is not None
        while True:
            m = _CANDIDATE.search(text, self._local(self.scan, base), stop)
            if m is None:
                if not decided_end:  # a stop may start in the run of stop characters the text ends in
                    j = stop
                    while j > self.scan - base and text[j - 1] in _STOP_RUN:
                        j -= 1
                    self.scan = base + j
                break
            if not decided_end and (m.end() >= stop or _NON_SPACE.search(text, m.end(), stop) is None):
                self.scan = base + m.start()  # the run, or what follows it, goes on past the text
                return False
            if _is_boundary(text, m, stop):
                span = self._span(text, base, base + m.end())
                if span is not None:
                    yield span
                self.sent_start, self.first = base + m.end(), None
            self.scan = base + m.end()
        if not decided_end:
            return False
        span = self._span(text, base, self.block_end)
        if span is not None:
            yield span
        return True

    def _span(self, text: str, base: int, end: int | None) -> Span | None:
        """The sentence from `sent_start` to `end`, whitespace trimmed (its head is the caller's when held)."""
        e = self._local(end, base)
        if self.first is None:
            span = _strip_span(text, self._local(self.sent_start, base), e)
            return None if span is None else (base + span[0], base + span[1])
        while e > 0 and text[e - 1].isspace():
            e -= 1
        return self.first, base + e
