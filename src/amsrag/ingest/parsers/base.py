"""What a document parser gives: ordered blocks (headings, text, lists, code, tables) with their page.

A parser reads a whole file within a `ParseBudget` (pages, bytes of markup, characters of text) and
raises `SkippedDocument` with a short reason ("encrypted", "no text layer", ...) for a file it cannot or
must not read: the ingest reports the file and goes on with the others.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from amsrag.errors import InputError

BlockKind = Literal["heading", "text", "list", "code", "table"]


@dataclass(frozen=True, slots=True)
class Grid:
    """A real table's cells (`amsrag.ingest.parsers.grids.real_grid`): one header row, rectangular data rows."""

    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    caption: str = ""


@dataclass(frozen=True, slots=True)
class Block:
    """One unit of a document: a heading (with its level, 1 = top), a paragraph run, a whole list, a code
    block or a table rendered as `cell | cell` rows. `page` is 1-based (PDF pages, slides), None without.
    A heading's `anchor` is the fragment that opens the document at it (an HTML id), None when it has none;
    a table's `grid` its cells when it is a real table (it goes to the table store too)."""

    kind: BlockKind
    text: str
    level: int = 0
    page: int | None = None
    anchor: str | None = None
    grid: Grid | None = None


@dataclass(slots=True)
class ParsedDocument:
    title: str
    blocks: list[Block] = field(default_factory=list)
    pages: int | None = None  # page or slide count, None for formats without pages


@dataclass(frozen=True, slots=True)
class ParseBudget:
    """Per-file limits that bound a parser's memory (config `ingest.max_pages`, `ingest.max_markup_mb`,
    `ingest.max_text_mb`, `ingest.max_file_mb`). Parsing HTML takes ~16x its size at the peak (a 50 MB page:
    850 MB), so markup is held to 16 MiB by default."""

    max_pages: int = 5000
    max_markup_bytes: int = 16 << 20  # HTML file size; DOCX / PPTX XML parts once unzipped
    max_text_chars: int = 32 << 20
    max_package_bytes: int = 256 << 20  # DOCX / PPTX with their media once unzipped (ingest.max_file_mb)
    ocr_pages: int = 100  # scanned PDF pages read by OCR per file (ingest.ocr_max_pages; 0: no OCR)


class SkippedDocument(InputError):
    """A file the ingest leaves out (with `reason`), while the rest of its folder is indexed."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"{path}: skipped: {reason}")
        self.path = path
        self.reason = reason


class TextBudget:
    """Counts extracted characters; a file past the budget is skipped, not read on."""

    def __init__(self, path: Path, budget: ParseBudget) -> None:
        self.path = path
        self.limit = budget.max_text_chars
        self.used = 0

    def take(self, text: str) -> str:
        self.used += len(text)
        if self.used > self.limit:
            raise SkippedDocument(self.path, f"more than {self.limit:,} characters of text (ingest.max_text_mb)")
        return text


def mib(n: int) -> str:
    return f"{n / (1 << 20):.1f} MiB"
