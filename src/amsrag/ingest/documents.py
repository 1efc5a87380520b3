"""Plain-text and Markdown files as chunked passages."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from amsrag.config import ChunkConfig
from amsrag.errors import InputError
from amsrag.ingest.chunking import TokenCounter, chunk_text
from amsrag.ingest.markdown import parse_markdown, section_title
from amsrag.ingest.readers import base_name, clean_text, iter_text_blocks, read_text
from amsrag.types import Passage


def _sections(path: Path, fmt: str, fallback_title: str) -> Iterator[tuple[str, str, str]]:
    """(passage title, section heading, section text) of a document, in order. Plain text is read as a
    stream of pieces ending at blank lines (a chunk never spans two pieces); Markdown as a whole."""
    if fmt == "text":
        for _, piece in iter_text_blocks(path):
            yield fallback_title, "", _normalise(piece)
        return
    source = _normalise(read_text(path))
    if not source.strip():
        return
    doc_title, sections = parse_markdown(source, fallback_title)
    title_section = next((s for s in sections if s.level == 1 and s.heading == doc_title), None)
    for section in sections:
        is_title = section is title_section
        yield section_title(doc_title, section, is_title), "" if is_title else section.heading, section.text


def _normalise(text: str) -> str:
    return clean_text(text.replace("\r\n", "\n").replace("\r", "\n"))


def read_document(
    path: Path,
    doc_id: str,
    fmt: str,
    chunking: ChunkConfig | None = None,
    counter: TokenCounter | None = None,
) -> Iterator[Passage]:
    """Chunks of a `text` or `markdown` file: ids `{doc_id}#{n}`, n counted over the whole file. A file
    with no text once whitespace and control characters are removed is an InputError (a Markdown file
    holding only headings gives no passages)."""
    config = chunking or ChunkConfig()
    counter = counter or TokenCounter()
    n = 0
    blank = True
    for title, heading, text in _sections(path, fmt, base_name(path)):
        blank = blank and fmt != "markdown" and not text.strip()  # a Markdown section: the file has text
        for chunk in chunk_text(text, config, counter):
            yield Passage(
                id=f"{doc_id}#{n}",
                text=chunk,
                title=title,
                doc_id=doc_id,
                metadata={"source": str(path), "chunk": n, "section": heading},
            )
            n += 1
    if n == 0 and blank:
        raise InputError(f"{path}: no text in this file (it is empty, or holds only whitespace and control "
                         f"characters); remove it or give it content")
