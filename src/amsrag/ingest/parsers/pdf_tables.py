"""Ruled tables on PDF pages, with the `pdf-tables` extra (pdfplumber, MIT, on pdfminer.six, MIT).

A page is searched only when PDFium shows it drawing at least `MIN_RULES` path objects (ruling lines, cell
borders or fills) and holds at most `MAX_PAGE_CHARS` characters and `MAX_PAGE_OBJECTS` objects, so a page of
running text costs one pass over its objects. pdfplumber's `lines` strategy then finds the tables its ruling
lines draw (docs/benchmarks/parsers.md §7: its text-alignment strategy finds a "table" on nearly every page of
prose). A table whose cells pass `grids.real_grid` (first row as the header) is a real table; a cell that a
merged cell covers takes that cell's text. The table's characters are then left out of the page's text, and
the table is put where its first character stood, so its text is not a passage twice. Without the extra, or
when a page is not searched, the page reads as it does without tables.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from amsrag.ingest.parsers.base import Grid
from amsrag.ingest.parsers.grids import real_grid
from amsrag.lazy import installed

MODULE = "pdfplumber"
MIN_RULES = 8  # path objects at least `_RULE_LENGTH` long; a text page draws a footnote rule or column lines
MAX_PAGE_CHARS = 20_000
MAX_PAGE_OBJECTS = 20_000
_RULE_LENGTH = 10.0  # points
_SETTINGS = {"vertical_strategy": "lines", "horizontal_strategy": "lines"}

Box = tuple[float, float, float, float]  # left, bottom, right, top in PDF user space


@dataclass(frozen=True, slots=True)
class PageTable:
    grid: Grid
    box: Box


def available() -> bool:
    return installed(MODULE)


def worth_searching(page: Any) -> bool:
    """Whether a pypdfium2 page draws enough long paths to hold a ruled table, within the per-page limits."""
    import pypdfium2.raw as pdfium_c

    if page.get_rotation() not in (0, 90):
        return False
    objects = pdfium_c.FPDFPage_CountObjects(page)
    if objects > MAX_PAGE_OBJECTS:
        return False
    rules = 0
    for obj in page.get_objects(filter=[pdfium_c.FPDF_PAGEOBJ_PATH], max_depth=2):
        left, bottom, right, top = obj.get_bounds()
        if max(right - left, top - bottom) >= _RULE_LENGTH:
            rules += 1
            if rules >= MIN_RULES:
                return True
    return False


def _cell_text(text: str | None) -> str:
    return " ".join((text or "").split())


def _spanned(table: Any, text_in: Callable[[Any], str] | None) -> list[list[str]]:
    """The table's rows, each slot that a merged cell covers (pdfplumber gives None) holding that cell's text;
    a cell's text is `text_in(cell box)` when given, else pdfplumber's."""
    rows = table.extract()
    texts = {}
    for row_cells, row_text in zip((r.cells for r in table.rows), rows, strict=False):
        for box, text in zip(row_cells, row_text, strict=False):
            if box is not None:
                texts[box] = _cell_text(text_in(box) if text_in is not None else text)
    out: list[list[str]] = []
    for row in table.rows:
        line: list[str] = []
        for c, column in enumerate(table.columns):
            box = row.cells[c] if c < len(row.cells) else None
            if box is not None:
                line.append(texts[box])
                continue
            x = (column.bbox[0] + column.bbox[2]) / 2
            y = (row.bbox[1] + row.bbox[3]) / 2
            cover = next((b for b in table.cells if b[0] <= x <= b[2] and b[1] <= y <= b[3]), None)
            line.append(texts.get(cover, "") if cover is not None else "")
        out.append(line)
    return out


def _titled(rows: list[list[str]]) -> tuple[str, list[list[str]]]:
    """A first row that is one cell across the whole width (a title drawn in the ruled frame) as the caption."""
    if len(rows) > 1 and len(set(rows[0])) == 1 and len(rows[0]) > 1:
        return rows[0][0], rows[1:]
    return "", rows


def _pdf_box(bbox: Sequence[float], rotation: int, mediabox: Box) -> Box:
    """pdfplumber's (x0, top, x1, bottom), measured from the shown page's top left, in PDF user space."""
    x0, top, x1, bottom = bbox
    mx0, my0, _, my1 = mediabox
    if rotation == 90:
        return (top + mx0, x0 + my0, bottom + mx0, x1 + my0)
    return (x0 + mx0, my1 - bottom, x1 + mx0, my1 - top)


def _reader(text_in: Callable[[Box], str], rotation: int, mediabox: Box) -> Callable[[Any], str]:
    return lambda bbox: text_in(_pdf_box(bbox, rotation, mediabox))


class PageTables:
    """The open pdfplumber document of one PDF, read page by page."""

    def __init__(self, path: Path) -> None:
        import pdfplumber

        self._pdf = pdfplumber.open(path)

    def close(self) -> None:
        self._pdf.close()

    def __enter__(self) -> PageTables:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def find(self, index: int, rotation: int, mediabox: Box,
             text_in: Callable[[Box], str] | None = None) -> list[PageTable]:
        """The real tables of the page (0-based `index`), top to bottom; `text_in(box)` reads a cell's text (the
        page's own text reader, so cells read as the rest of the page does), else pdfplumber's text."""
        page = self._pdf.pages[index]
        try:
            if len(page.chars) > MAX_PAGE_CHARS:
                return []
            found: list[PageTable] = []
            for table in sorted(page.find_tables(_SETTINGS), key=lambda t: (t.bbox[1], t.bbox[0])):
                read = None if text_in is None else _reader(text_in, rotation, mediabox)
                caption, rows = _titled(_spanned(table, read))
                grid = real_grid(rows[0], rows[1:], caption) if rows else None
                if grid is not None:
                    found.append(PageTable(grid, _pdf_box(table.bbox, rotation, mediabox)))
            return found
        finally:
            page.close()
