"""Plain-text and Markdown files as chunked passages."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from amsrag.config import ChunkConfig
from amsrag.ingest.chunking import TokenCounter, chunk_text
from amsrag.ingest.markdown import parse_markdown, section_title
from amsrag.ingest.readers import base_name, read_text
from amsrag.types import Passage


def _sections(source: str, fmt: str, fallback_title: str) -> Iterator[tuple[str, str, str]]:
    """(passage title, section heading, section text) of a document, in order."""
    if fmt == "text":
        yield fallback_title, "", source
        return
    doc_title, sections = parse_markdown(source, fallback_title)
    title_section = next((s for s in sections if s.level == 1 and s.heading == doc_title), None)
    for section in sections:
        is_title = section is title_section
        yield section_title(doc_title, section, is_title), "" if is_title else section.heading, section.text


def read_document(
    path: Path,
    doc_id: str,
    fmt: str,
    chunking: ChunkConfig | None = None,
    counter: TokenCounter | None = None,
) -> Iterator[Passage]:
    """Chunks of a `text` or `markdown` file: ids `{doc_id}#{n}`, n counted over the whole file."""
    source = read_text(path).replace("\r\n", "\n").replace("\r", "\n")
    if not source.strip():
        return
    config = chunking or ChunkConfig()
    counter = counter or TokenCounter()
    n = 0
    for title, heading, text in _sections(source, fmt, base_name(path)):
        for chunk in chunk_text(text, config, counter):
            yield Passage(
                id=f"{doc_id}#{n}",
                text=chunk,
                title=title,
                doc_id=doc_id,
                metadata={"source": str(path), "chunk": n, "section": heading},
            )
            n += 1
