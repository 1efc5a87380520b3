"""Document parsers: PDF (pypdfium2), HTML (selectolax), DOCX (python-docx), PPTX (python-pptx), EPUB (zipfile
and the HTML parser).

`parse_document` reads a file of one of `DOCUMENT_FORMATS` into ordered blocks; see `base`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from amsrag.ingest.parsers.base import Block, ParseBudget, ParsedDocument, SkippedDocument

Parser = Callable[[Path, ParseBudget], ParsedDocument]

DOCUMENT_SUFFIXES: dict[str, tuple[str, ...]] = {
    "pdf": (".pdf",),
    "html": (".html", ".htm", ".xhtml"),
    "docx": (".docx",),
    "pptx": (".pptx",),
    "epub": (".epub",),
}
DOCUMENT_FORMATS: tuple[str, ...] = tuple(DOCUMENT_SUFFIXES)


def _parser(fmt: str) -> Parser:
    if fmt == "pdf":
        from amsrag.ingest.parsers.pdf import parse_pdf

        return parse_pdf
    if fmt == "html":
        from amsrag.ingest.parsers.html import parse_html

        return parse_html
    if fmt == "epub":
        from amsrag.ingest.parsers.epub import parse_epub

        return parse_epub
    from amsrag.ingest.parsers.office import parse_docx, parse_pptx

    return parse_docx if fmt == "docx" else parse_pptx


def parse_document(path: Path, fmt: str, budget: ParseBudget | None = None,
                   notice: Callable[[str], None] | None = None) -> ParsedDocument:
    """The blocks of a document file; SkippedDocument (an InputError) names a file left out and why. `notice`
    hears the progress of a long parse (a scanned PDF read by OCR, page by page)."""
    if fmt not in DOCUMENT_SUFFIXES:
        raise ValueError(f"not a document format: {fmt}")
    try:
        if fmt == "pdf":
            from amsrag.ingest.parsers.pdf import parse_pdf

            return parse_pdf(path, budget or ParseBudget(), notice)
        return _parser(fmt)(path, budget or ParseBudget())
    except MemoryError:
        raise SkippedDocument(path, "out of memory while parsing (lower ingest.max_pages / max_markup_mb)") \
            from None
    except RecursionError:
        raise SkippedDocument(path, "nested too deeply to parse") from None


__all__ = ["DOCUMENT_FORMATS", "DOCUMENT_SUFFIXES", "Block", "ParseBudget", "ParsedDocument", "SkippedDocument",
           "parse_document"]
