"""Ruled tables on PDF pages, with the `pdf-tables` extra (pdfplumber, MIT, on pdfminer.six, MIT).

Chosen by measurement (docs/benchmarks/parsers.md §7): pdfplumber's `lines` strategy finds the tables that ruling
lines draw; its text-alignment strategy finds a "table" on nearly every page of prose, so tables without rules
stay text. Steps, each bounded:

- **Gate** (`worth_searching`): a page is searched only when PDFium shows it drawing a ruled grid,
  `MIN_RULES_ACROSS` horizontal rules and `MIN_RULES_SIDE_BY_SIDE` vertical rules with the same ends, as a row of
  cells has them (a frame around code or a note has two), on a page of at most `MAX_PAGE_CHARS` characters and
  `MAX_PAGE_OBJECTS` objects. A page of prose costs one pass over its objects' types.
- **Find** (`page_tables`): `lines`, plus the open sides of tables drawn without outer borders (`open_sides`).
- **Read** (`read_table`): cells read by PDFium in each cell's box (as the rest of the page reads); a merged
  cell's text repeated into the slots it covers; a first row across the whole width is the caption; a band of
  rows drawn without rules between them is split (`split_bands`); the first row is the header when it reads as
  one (`is_header`), else the table may go on from the page before (`pdf.py` joins the two).

A table is real when `grids.real_grid` says so of its header and all its rows. The parser (`pdf.py`) then leaves
the table's characters out of the page's text and puts the table where its first character stood. Without the
extra a PDF reads as it did before tables.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from amsrag.lazy import installed

MODULE = "pdfplumber"
MIN_RULES_ACROSS = 3  # horizontal rules on the page
MIN_RULES_SIDE_BY_SIDE = 3  # vertical rules at different x with the same ends: a row of cells (a frame has 2)
_THIN = 2.5  # points: a path this thin across is a rule
MAX_PAGE_CHARS = 20_000
MAX_PAGE_OBJECTS = 20_000
_RULE_LENGTH = 10.0  # points
_MIN_SHARED_RULES = 3  # horizontal rules with the same ends that make a table's open sides
_MIN_BANDED = 3  # filled cells of the same line count that make a row a band of rows
SETTINGS = {"vertical_strategy": "lines", "horizontal_strategy": "lines"}
_VALUE = re.compile(r"[\d\s$€£¥%()+\-.,:/]*\d[\d\s$€£¥%()+\-.,:/]*")  # a number, an amount, a date
_YEAR = re.compile(r"(?:19|20)\d\d")  # a column named by its year ("Region | 2019 | 2020")

Box = tuple[float, float, float, float]  # left, bottom, right, top in PDF user space


@dataclass(frozen=True, slots=True)
class PageTable:
    """A table found on a page: its header, None when its first row is not one (it may be the rest of a table
    from the page before), and its data rows."""

    box: Box
    header: tuple[str, ...] | None
    rows: tuple[tuple[str, ...], ...]
    caption: str = ""


def available() -> bool:
    return installed(MODULE)


def _path_bounds(page: Any) -> list[tuple[float, float, float, float]]:
    """The bounds (left, bottom, right, top) of the page's top-level path objects, read through PDFium's C API:
    wrapping every text object in Python costs more than the page's text."""
    import ctypes

    import pypdfium2.raw as pdfium_c

    raw = page.raw
    left, bottom, right, top = (ctypes.c_float() for _ in range(4))
    found = []
    for index in range(pdfium_c.FPDFPage_CountObjects(raw)):
        obj = pdfium_c.FPDFPage_GetObject(raw, index)
        if pdfium_c.FPDFPageObj_GetType(obj) == pdfium_c.FPDF_PAGEOBJ_PATH and pdfium_c.FPDFPageObj_GetBounds(
                obj, ctypes.byref(left), ctypes.byref(bottom), ctypes.byref(right), ctypes.byref(top)):
            found.append((left.value, bottom.value, right.value, top.value))
    return found


def worth_searching(page: Any, chars: int) -> bool:
    """Whether a pypdfium2 page of `chars` characters draws a ruled grid (module doc), within the per-page
    limits."""
    import pypdfium2.raw as pdfium_c

    rotation = page.get_rotation()
    if rotation not in (0, 90) or chars > MAX_PAGE_CHARS or pdfium_c.FPDFPage_CountObjects(
            page.raw) > MAX_PAGE_OBJECTS:
        return False
    across = 0
    uprights: list[tuple[int, float, float]] = []  # x, bottom, top of the vertical rules
    for left, bottom, right, top in _path_bounds(page):
        if rotation == 90:  # the page is shown turned: its rules across are vertical in PDF space
            left, bottom, right, top = bottom, left, top, right
        if max(right - left, top - bottom) < _RULE_LENGTH:
            continue
        if top - bottom <= _THIN:
            across += 1
        elif right - left <= _THIN:
            uprights.append((round((left + right) / 2), bottom, top))
    if across < MIN_RULES_ACROSS:
        return False
    rows: dict[tuple[int, int], set[int]] = {}  # the x of the vertical rules that start and end together
    for x, bottom, top in uprights:
        rows.setdefault((round(bottom), round(top)), set()).add(x)
    return any(len(xs) >= MIN_RULES_SIDE_BY_SIDE for xs in rows.values())


def _cell_text(text: str | None) -> str:
    return " ".join((text or "").split())


def _spanned(table: Any, text_in: Callable[[Any], str] | None) -> list[list[str]]:
    """The table's rows of raw cell text, each slot that a merged cell covers (pdfplumber gives None) holding
    that cell's text; a cell's text is `text_in(cell box)` when given, else pdfplumber's."""
    texts: dict[Any, str] = {}
    if text_in is None:
        for row_cells, row_text in zip((r.cells for r in table.rows), table.extract(), strict=False):
            texts.update((box, text or "") for box, text in zip(row_cells, row_text, strict=False) if box)
    else:
        texts.update((box, text_in(box)) for row in table.rows for box in row.cells if box is not None)
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


def split_bands(rows: list[list[str]]) -> list[list[str]]:
    """Data rows with whitespace squashed; a row whose filled cells (`_MIN_BANDED` or more) all hold the same
    number of lines, more than one, is that many rows: a band of rows drawn without rules between them (a
    sheet ruled every five rows). A row where only some cells wrap is one row."""
    out: list[list[str]] = []
    for row in rows:
        lines = [[part.strip() for part in cell.splitlines() if part.strip()] for cell in row]
        heights = {len(cell) for cell in lines if cell}
        filled = sum(1 for cell in lines if cell)
        if len(heights) == 1 and (height := heights.pop()) > 1 and filled >= _MIN_BANDED:
            out += [[cell[k] if cell else "" for cell in lines] for k in range(height)]
        else:
            out.append([_cell_text(cell) for cell in row])
    return out


def _titled(rows: list[list[str]]) -> tuple[str, list[list[str]]]:
    """First rows that are one cell across the whole width (a title drawn in the ruled frame, an empty band)
    dropped; the first such title is the caption."""
    caption = ""
    while len(rows) > 1 and len(rows[0]) > 1 and len({_cell_text(c) for c in rows[0]}) == 1:
        caption = caption or rows[0][0]
        rows = rows[1:]
    return caption, rows


def _pdf_box(bbox: Sequence[float], rotation: int, mediabox: Box) -> Box:
    """pdfplumber's (x0, top, x1, bottom), measured from the shown page's top left, in PDF user space."""
    x0, top, x1, bottom = bbox
    mx0, my0, _, my1 = mediabox
    if rotation == 90:
        return (top + mx0, x0 + my0, bottom + mx0, x1 + my0)
    return (x0 + mx0, my1 - bottom, x1 + mx0, my1 - top)


def open_sides(page: Any) -> list[tuple[tuple[float, float, float, float], list[dict[str, Any]]]]:
    """Runs of `_MIN_SHARED_RULES`+ horizontal rules that start and end together (joined where they meet) and
    are not closed by a vertical edge at an end: a table drawn without outer borders (DocBook, many LaTeX
    classes), which pdfplumber's `lines` strategy would cut down to the columns between inner rules. Each as
    its bounding box (pdfplumber's x0, top, x1, bottom) and the vertical edges that close its open ends."""
    from pdfplumber.table import merge_edges

    tolerance = 3
    rules = merge_edges([e for e in page.edges if e["orientation"] == "h"], tolerance, tolerance, tolerance,
                        tolerance)
    verticals = [e for e in page.vertical_edges if e["height"] >= 2]
    runs: dict[tuple[int, int], list[Any]] = {}
    for rule in rules:
        if rule["width"] >= _RULE_LENGTH:
            runs.setdefault((round(rule["x0"]), round(rule["x1"])), []).append(rule)
    found = []
    for edges in runs.values():
        if len(edges) < _MIN_SHARED_RULES:
            continue
        x0, x1 = edges[0]["x0"], edges[0]["x1"]
        top, bottom = min(e["top"] for e in edges), max(e["bottom"] for e in edges)
        sides = [{"x0": x, "x1": x, "top": top, "bottom": bottom, "width": 0, "height": bottom - top,
                  "orientation": "v", "object_type": "open_side_edge"} for x in (x0, x1)
                 if not any(abs(v["x0"] - x) <= tolerance and v["top"] < bottom and v["bottom"] > top
                            for v in verticals)]
        if sides:
            found.append(((x0, top, x1, bottom), sides))
    return found


def _overlaps(a: Sequence[float], b: Sequence[float]) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def page_tables(page: Any) -> list[Any]:
    """pdfplumber's tables of a page, top to bottom: the `lines` strategy, and in the box of each run of rules
    with open sides (`open_sides`) the same with those sides drawn in. The box is searched apart so that its
    sides are not snapped to other vertical rules of the page (code boxes beside a table)."""
    margin = 2
    tables = []
    for (x0, top, x1, bottom), sides in open_sides(page):
        box = (max(x0 - margin, page.bbox[0]), max(top - margin, page.bbox[1]),
               min(x1 + margin, page.bbox[2]), min(bottom + margin, page.bbox[3]))
        tables += page.crop(box, strict=False).find_tables({**SETTINGS, "explicit_vertical_lines": sides})
    tables += [t for t in page.find_tables(SETTINGS) if not any(_overlaps(t.bbox, o.bbox) for o in tables)]
    return sorted(tables, key=lambda t: (t.bbox[1], t.bbox[0]))


def is_header(row: Sequence[str]) -> bool:
    """Whether a first row reads as a header: some text, and fewer than half of its filled cells values
    (numbers, amounts, dates; a bare year names a column), which a data row carried over from the page before
    has."""
    filled = [cell.strip() for cell in row if cell.strip()]
    values = sum(1 for cell in filled if _VALUE.fullmatch(cell) and not _YEAR.fullmatch(cell))
    return bool(filled) and 2 * values < len(filled)


def read_table(table: Any, box: Box, text_in: Callable[[Any], str] | None = None) -> PageTable | None:
    """A pdfplumber table's header (when its first row is one, `is_header`) and data rows; `text_in(pdfplumber
    cell box)` reads a cell's text, else pdfplumber's. None for a table without rows."""
    caption, rows = _titled(_spanned(table, text_in))
    if not rows:
        return None
    header = [_cell_text(cell) for cell in rows[0]]
    if not is_header(header):
        return PageTable(box, None, tuple(map(tuple, split_bands(rows))), _cell_text(caption))
    return PageTable(box, tuple(header), tuple(map(tuple, split_bands(rows[1:]))), _cell_text(caption))


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
        """The tables of the page (0-based `index`), top to bottom: those with a header, and a first one without
        (the rest of a table from the page before, perhaps); `text_in(box)` reads a cell's text (the page's own
        text reader, so cells read as the rest of the page does), else pdfplumber's text."""
        page = self._pdf.pages[index]
        try:
            found: list[PageTable] = []
            for table in page_tables(page):
                read = read_table(table, _pdf_box(table.bbox, rotation, mediabox),
                                  None if text_in is None else _reader(text_in, rotation, mediabox))
                if read is not None and (read.header is not None or not found):
                    found.append(read)
            return found
        finally:
            page.close()
