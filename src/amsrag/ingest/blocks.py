"""Structure-aware chunking of parsed documents (PDF, HTML, DOCX, PPTX) into passages with citations.

The document's extracted text is its blocks joined by blank lines; every passage is a slice of it
(`char_start`, `char_end`). Passages never cross a heading: each carries its heading path (`section`,
the headings below the title heading joined by " › "), its heading's `anchor` when the format has one (an
HTML id: the citation's url opens the page there) and, for paged formats, the 1-based `page` it
starts on (`page_end` when it runs onto a later one). Within a section, a run of paragraphs (in a PDF
across page breaks, which join as line breaks) is one passage when it fits the token budget, else cut by
the sentence chunker (`chunking.chunk_spans`, with its overlap); a list, code block or table is kept
whole when it fits, else cut between its items (lines); whole units are packed up to the budget.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from amsrag.config import ChunkConfig
from amsrag.embed.tokens import TokenCounter
from amsrag.ingest.chunking import chunk_spans
from amsrag.ingest.parsers.base import Block, ParsedDocument
from amsrag.text.citations import SECTION_JOIN
from amsrag.types import Passage

_BLOCK_GAP = "\n\n"
_ITEM_START = re.compile(r"^- ", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class _Unit:
    """A run of the extracted text that goes into one chunk whole (or is a chunk of its own: `alone`)."""

    start: int
    end: int
    tokens: int
    first_page: int | None
    last_page: int | None
    alone: bool = False


@dataclass(frozen=True, slots=True)
class _Placed:
    """A block with its start in the extracted text and its token count."""

    block: Block
    start: int
    tokens: int

    @property
    def end(self) -> int:
        return self.start + len(self.block.text)


@dataclass(slots=True)
class _Section:
    path: tuple[str, ...]
    blocks: list[_Placed]
    anchor: str | None = None  # its own heading's (never an enclosing heading's)


def _line_spans(text: str, start: int, kind: str) -> list[tuple[int, int]]:
    """Where a list (at its top-level items) or a code block / table (at lines) may be cut."""
    if kind == "list":
        cuts = [m.start() for m in _ITEM_START.finditer(text)] or [0]
        if cuts[0] != 0:
            cuts.insert(0, 0)
    else:
        cuts = [0] + [m.end() for m in re.finditer(r"\n", text)]
    bounds = [*cuts, len(text)]
    spans = []
    for a, b in pairwise(bounds):
        piece = text[a:b].rstrip()
        if piece.strip():
            spans.append((start + a, start + a + len(piece)))
    return spans


def _pages_of(run: Sequence[_Placed], start: int, end: int) -> tuple[int | None, int | None]:
    pages = [p.block.page for p in run if p.block.page is not None and p.start < end and p.end > start]
    return (min(pages), max(pages)) if pages else (None, None)


class _Packer:
    def __init__(self, full: str, config: ChunkConfig, counter: TokenCounter) -> None:
        self.full = full
        self.config = config
        self.counter = counter

    def text_units(self, run: Sequence[_Placed]) -> list[_Unit]:
        """A run of paragraphs (across pages, in a PDF): whole when it fits, else sentence chunks; the last
        chunk may share a passage with what follows."""
        start, end = run[0].start, run[-1].end
        tokens = sum(p.tokens for p in run)
        if tokens <= self.config.max_tokens:
            return [_Unit(start, end, tokens, *_pages_of(run, start, end))]
        spans = [(start + a, start + b) for a, b in chunk_spans(self.full[start:end], self.config, self.counter)]
        units = [_Unit(a, b, 0, *_pages_of(run, a, b), alone=True) for a, b in spans[:-1]]
        a, b = spans[-1]
        return [*units, _Unit(a, b, self.counter.count(self.full[a:b]), *_pages_of(run, a, b))]

    def item_units(self, placed: _Placed) -> list[_Unit]:
        """A list, code block or table: whole when it fits, else cut between items / lines."""
        page = placed.block.page
        budget = self.config.max_tokens
        if placed.tokens <= budget:
            return [_Unit(placed.start, placed.end, placed.tokens, page, page)]
        spans = _line_spans(placed.block.text, placed.start, placed.block.kind)
        counts = self.counter.counts([self.full[a:b] for a, b in spans])
        out: list[_Unit] = []
        for (a, b), n in zip(spans, counts, strict=True):
            if n <= budget:
                out.append(_Unit(a, b, n, page, page))
            else:  # one item longer than the budget: the sentence chunker cuts it
                out.extend(_Unit(a + s, a + e, 0, page, page, alone=True)
                           for s, e in chunk_spans(self.full[a:b], self.config, self.counter))
        return out

    def units(self, blocks: Sequence[_Placed]) -> list[_Unit]:
        out: list[_Unit] = []
        run: list[_Placed] = []
        for placed in blocks:
            if placed.block.kind == "text":
                run.append(placed)
                continue
            if run:
                out.extend(self.text_units(run))
                run = []
            out.extend(self.item_units(placed))
        if run:
            out.extend(self.text_units(run))
        return out

    def chunks(self, units: Sequence[_Unit]) -> Iterator[list[_Unit]]:
        run: list[_Unit] = []
        total = 0
        for unit in units:
            if run and (unit.alone or run[-1].alone or total + unit.tokens > self.config.max_tokens):
                yield run
                run, total = [], 0
            run.append(unit)
            total += unit.tokens
        if run:
            yield run


def _gap(before: Block, after: Block) -> str:
    """A line break where a PDF page's text runs on to the next page's, a blank line between blocks."""
    if before.kind == after.kind == "text" and before.page is not None and after.page not in (None, before.page):
        return "\n"
    return _BLOCK_GAP


def _layout(blocks: Sequence[Block]) -> tuple[str, list[int]]:
    """The extracted text and each block's start in it."""
    parts: list[str] = []
    starts, pos = [], 0
    for i, block in enumerate(blocks):
        if i:
            gap = _gap(blocks[i - 1], block)
            parts.append(gap)
            pos += len(gap)
        starts.append(pos)
        parts.append(block.text)
        pos += len(block.text)
    return "".join(parts), starts


def _sections(doc: ParsedDocument, counter: TokenCounter, starts: Sequence[int]) -> list[_Section]:
    counts = counter.counts([b.text for b in doc.blocks])
    stack: list[tuple[int, str]] = []
    sections = [_Section((), [])]
    for block, start, tokens in zip(doc.blocks, starts, counts, strict=True):
        if block.kind == "heading" and " ".join(block.text.split()) == doc.title and not stack:
            sections.append(_Section((), [], block.anchor))  # the document's title heading: the path starts below it
            continue
        if block.kind == "heading":
            while stack and stack[-1][0] >= block.level:
                stack.pop()
            stack.append((block.level, " ".join(block.text.split())))
            sections.append(_Section(tuple(h for _, h in stack), [], block.anchor))
            continue
        if block.text.strip():
            sections[-1].blocks.append(_Placed(block, start, tokens))
    return [s for s in sections if s.blocks]


def document_passages(doc: ParsedDocument, doc_id: str, source: str, fmt: str, config: ChunkConfig | None = None,
                      counter: TokenCounter | None = None, metadata: dict[str, Any] | None = None) -> list[Passage]:
    """The passages of a parsed document: ids `{doc_id}#{n}`, citations in their metadata (module doc)."""
    full, starts = _layout(doc.blocks)
    packer = _Packer(full, config or ChunkConfig(), counter or TokenCounter())
    passages: list[Passage] = []
    for section in _sections(doc, packer.counter, starts):
        title = f"{doc.title}{SECTION_JOIN}{section.path[-1]}" if section.path and section.path[-1] != doc.title \
            else doc.title
        for run in packer.chunks(packer.units(section.blocks)):
            start, end = run[0].start, run[-1].end
            meta: dict[str, Any] = {**(metadata or {}), "source": source, "type": fmt, "chunk": len(passages),
                                    "section": SECTION_JOIN.join(section.path), "char_start": start,
                                    "char_end": end}
            if section.anchor:
                meta["anchor"] = section.anchor
            pages = [p for u in run for p in (u.first_page, u.last_page) if p is not None]
            if pages:
                meta["page"] = min(pages)
                if max(pages) != min(pages):
                    meta["page_end"] = max(pages)
            passages.append(Passage(id=f"{doc_id}#{len(passages)}", text=full[start:end], title=title,
                                    doc_id=doc_id, metadata=meta))
    return passages


def extracted_text(doc: ParsedDocument) -> str:
    """The text that passages' `char_start` / `char_end` index into."""
    return _layout(doc.blocks)[0]
