"""Plain-text and Markdown files as chunked passages.

A text file is read and chunked as a stream (`readers.iter_text_windows`, `stream_chunking`): memory does not
grow with the file. A Markdown file is parsed whole (its structure, headings and blocks, needs the document).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import chain
from pathlib import Path
from typing import Any

from amsrag.config import ChunkConfig
from amsrag.embed.tokens import TokenCounter
from amsrag.errors import InputError
from amsrag.ingest.chunking import iter_chunks
from amsrag.ingest.markdown import parse_markdown, section_title
from amsrag.ingest.readers import base_name, clean_text, iter_text_windows, read_text
from amsrag.ingest.stream_chunking import iter_stream_chunks
from amsrag.text.citations import SECTION_JOIN
from amsrag.types import Passage


class _Stream:
    """The windows of one piece of a text file, normalised as `_normalise` does the whole piece."""

    def __init__(self, windows: Iterator[str | None]) -> None:
        self._windows = windows
        self.has_text = False  # a character that is not whitespace was seen
        self._out_windows = self._read()

    def __iter__(self) -> Iterator[str]:
        """The windows, once (what the first reader left is what a second one gets)."""
        return self._out_windows

    def _read(self) -> Iterator[str]:
        carry = ""  # a carriage return that the next window's newline may join
        for window in self._windows:
            if window is None:
                break
            window = carry + window
            carry = "\r" if window.endswith("\r") else ""
            yield from self._out(window[: len(window) - len(carry)])
        yield from self._out(carry)

    def _out(self, window: str) -> Iterator[str]:
        window = _normalise(window)
        self.has_text = self.has_text or (not window.isspace() and bool(window))
        if window:
            yield window


# (passage title, section heading path, its text or a stream of it, its heading's anchor)
Section = tuple[str, str, str | _Stream, str | None]


def _file_sections(path: Path, fmt: str, fallback_title: str) -> Iterator[Section]:
    """(passage title, section heading, section text) of a file, in order. Plain text is a stream of
    pieces ending at blank lines (a chunk never spans two pieces), each consumed before the next is read;
    Markdown is read whole."""
    if fmt == "text":
        windows = iter(iter_text_windows(path))
        for first in windows:
            piece = _Stream(chain([first], windows) if first is not None else iter(()))
            yield fallback_title, "", piece, None
            for _ in piece:  # what the consumer left of the piece
                pass
        return
    yield from _sections(read_text(path), fmt, fallback_title)


def _sections(source: str, fmt: str, fallback_title: str) -> Iterator[Section]:
    source = _normalise(source)
    if not source.strip():
        return
    if fmt == "text":
        yield fallback_title, "", source, None
        return
    doc_title, sections = parse_markdown(source, fallback_title)
    title_section = next((s for s in sections if s.level == 1 and s.heading == doc_title), None)
    path: list[tuple[int, str]] = []  # the heading path below the document title
    for section in sections:
        is_title = section is title_section
        while path and section.level and path[-1][0] >= section.level:
            path.pop()
        if section.heading and not is_title:
            path.append((section.level, section.heading))
        yield (section_title(doc_title, section, is_title), SECTION_JOIN.join(h for _, h in path), section.text,
               section.anchor)


def _normalise(text: str) -> str:
    return clean_text(text.replace("\r\n", "\n").replace("\r", "\n"))


def _chunks(text: str | _Stream, config: ChunkConfig, counter: TokenCounter) -> Iterator[str]:
    if isinstance(text, str):
        return iter_chunks(text, config, counter)
    return (chunk for _, chunk in iter_stream_chunks(text, config, counter))


def _chunked(sections: Iterable[Section], doc_id: str, fmt: str, chunking: ChunkConfig | None,
             counter: TokenCounter | None, metadata: dict[str, Any], where: str) -> Iterator[Passage]:
    config = chunking or ChunkConfig()
    counter = counter or TokenCounter()
    n = 0
    blank = True
    for title, heading, text, anchor in sections:
        for chunk in _chunks(text, config, counter):
            meta = {**metadata, "chunk": n, "section": heading}
            if anchor:
                meta["anchor"] = anchor
            yield Passage(id=f"{doc_id}#{n}", text=chunk, title=title, doc_id=doc_id, metadata=meta)
            n += 1
        has_text = text.has_text if isinstance(text, _Stream) else bool(text.strip())
        blank = blank and fmt != "markdown" and not has_text  # a Markdown section: the document has text
    if n == 0 and blank:
        raise InputError(f"{where} no text (it is empty, or holds only whitespace and control characters); "
                         f"remove it or give it content")


def read_document(
    path: Path,
    doc_id: str,
    fmt: str,
    chunking: ChunkConfig | None = None,
    counter: TokenCounter | None = None,
    source: str | None = None,
) -> Iterator[Passage]:
    """Chunks of a `text` or `markdown` file: ids `{doc_id}#{n}`, n counted over the whole file, metadata
    `source` (default: the path as given) and `type`. A file with no text once whitespace and control
    characters are removed is an InputError (a Markdown file holding only headings gives no passages)."""
    yield from _chunked(_file_sections(path, fmt, base_name(path)), doc_id, fmt, chunking, counter,
                        {"source": source or str(path), "type": fmt}, f"{path}: this file has")


def text_document(
    doc_id: str,
    text: str,
    fmt: str = "text",
    title: str = "",
    chunking: ChunkConfig | None = None,
    counter: TokenCounter | None = None,
    metadata: dict[str, Any] | None = None,
) -> list[Passage]:
    """The chunks of a document given as a string (`text` or `markdown`), as `read_document` makes them
    of a file; `title` is the fallback title (default: the doc_id's last path part)."""
    if fmt not in ("text", "markdown"):
        raise InputError(f"format {fmt!r}: a document's text is read as text or markdown")
    fallback = title or doc_id.rsplit("/", 1)[-1]
    return list(_chunked(_sections(text, fmt, fallback), doc_id, fmt, chunking, counter, dict(metadata or {}),
                         f"document {doc_id!r} has"))
