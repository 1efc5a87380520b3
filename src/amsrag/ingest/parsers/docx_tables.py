"""Word tables: layout table or not, and the grid of a real one (the rule: `amsrag.ingest.parsers.grids`).

A layout table nests a table, has a cell holding a heading or list paragraph, or has a single column; its
cells' paragraphs are read as blocks. Word marks no header cells, so the header row is the first row when the
table says it has one: the row is marked "Repeat as header row" (`w:tblHeader`), or the table's "Header Row"
style option (`w:tblLook` `firstRow`, on by default in Word) is set. Merged cells repeat their text into every
grid cell they cover (python-docx's `row.cells`).
"""

from __future__ import annotations

import re
from typing import Any

from amsrag.ingest.parsers.base import Block, Grid, TextBudget
from amsrag.ingest.parsers.grids import real_grid

_HEADING_STYLE = re.compile(r"^(?:heading\s*(\d)|title)$", re.IGNORECASE)
_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_FIRST_ROW = 0x0020  # the firstRow bit of tblLook's hexadecimal w:val (older Word writes only that)
_FALSE = ("0", "false", "off")


def style_name(paragraph: Any) -> str:
    try:
        return str(paragraph.style.name or "") if paragraph.style is not None else ""
    except (KeyError, AttributeError):
        return ""


def _squash(text: str) -> str:
    return " ".join(text.split())


def _unique_cells(table: Any) -> list[Any]:
    seen: set[int] = set()
    out = []
    for row in table.rows:
        for cell in row.cells:
            if id(cell._tc) not in seen:
                seen.add(id(cell._tc))
                out.append(cell)
    return out


def is_layout(table: Any) -> bool:
    """Whether a Word table places content rather than holding data (module doc)."""
    widest = 0
    for row in table.rows:
        widest = max(widest, len(row.cells))
    if widest <= 1:
        return True
    for cell in _unique_cells(table):
        if cell.tables:
            return True
        for paragraph in cell.paragraphs:
            style = style_name(paragraph).lower()
            if _HEADING_STYLE.match(style) or "list" in style:
                return True
    return False


def _has_header_row(table: Any) -> bool:
    tbl = table._tbl
    first = tbl.tr_lst[0] if tbl.tr_lst else None
    if first is not None:
        for mark in first.xpath("./w:trPr/w:tblHeader"):
            if (mark.get(f"{_W}val") or "true").lower() not in _FALSE:
                return True
    for look in tbl.xpath("./w:tblPr/w:tblLook"):
        flag = look.get(f"{_W}firstRow")
        if flag is not None:
            return flag.lower() not in _FALSE
        try:
            return bool(int(look.get(f"{_W}val") or "0", 16) & _FIRST_ROW)
        except ValueError:
            return False
    return False


def docx_grid(table: Any) -> Grid | None:
    """The grid of a Word table that is not a layout table, when it is a real one (module doc)."""
    if not _has_header_row(table):
        return None
    rows = [[_squash(cell.text) for cell in row.cells] for row in table.rows]
    if not rows:
        return None
    return real_grid(rows[0], rows[1:])


def layout_blocks(table: Any, budget: TextBudget) -> list[Block]:
    """A layout table's content in reading order: heading-styled paragraphs as headings, list items as lists, the
    rest as text."""
    blocks: list[Block] = []
    for cell in _unique_cells(table):
        for item in cell.iter_inner_content():
            if hasattr(item, "rows"):
                blocks += layout_blocks(item, budget)
                continue
            text = _squash(item.text)
            if not text:
                continue
            style = style_name(item)
            heading = _HEADING_STYLE.match(style)
            if heading is not None:
                level = int(heading.group(1)) + 1 if heading.group(1) else 1
                blocks.append(Block("heading", budget.take(text), level))
            elif "list" in style.lower():
                blocks.append(Block("list", budget.take(f"- {text}")))
            else:
                blocks.append(Block("text", budget.take(text)))
    return blocks
