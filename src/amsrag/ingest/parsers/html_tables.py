"""HTML tables: layout table or not, and the grid of a real one (the rule: `amsrag.ingest.parsers.grids`).

A layout table has `role="presentation"` (or `none`), nests a table, has a cell holding a heading, list,
code block, quote or more than one paragraph, or has a single column. The header row is the one row of
`thead`, else a first row of `th` cells only; a table with no header or a `thead` of several rows is no real
table. `colspan` / `rowspan` repeat a cell's text into the cells it covers; `tfoot` rows (totals) stay out
of the grid, as they stay in the text.
"""

from __future__ import annotations

from typing import Any

from amsrag.ingest.parsers.base import Grid
from amsrag.ingest.parsers.grids import MAX_GRID_ROWS, real_grid
from amsrag.tables.catalog import MAX_COLUMNS

_LAYOUT_INSIDE = "h1, h2, h3, h4, h5, h6, ul, ol, dl, pre, blockquote"
_CELLS = ("td", "th")
Cell = tuple[str, int, int]  # text, colspan, rowspan


def squash(text: str) -> str:
    return " ".join(text.split())


def _cell_text(cell: Any) -> str:
    return squash(cell.text(deep=True, separator=" "))


def _cells(tr: Any) -> list[Any]:
    return [c for c in tr.iter() if c.tag in _CELLS]


def _span(cell: Any, name: str, limit: int) -> int:
    try:
        n = int(str(cell.attributes.get(name) or "1").strip())
    except ValueError:
        return 1
    return min(max(n, 1), limit)


def is_layout(table: Any) -> bool:
    """Whether `table` places content rather than holding data (module doc)."""
    if (table.attributes.get("role") or "").strip().lower() in ("presentation", "none"):
        return True
    if len(table.css("table")) > 1:
        return True
    widest = 0
    for tr in table.css("tr"):
        cells = _cells(tr)
        widest = max(widest, sum(_span(c, "colspan", MAX_COLUMNS + 1) for c in cells))
        for cell in cells:
            if cell.css_first(_LAYOUT_INSIDE) is not None or len(cell.css("p, div")) > 1:
                return True
    return widest <= 1


def table_rows(table: Any) -> list[str]:
    """The table's rows as `cell | cell` lines, as they are written (the text of a table block)."""
    rows = []
    for tr in table.css("tr"):
        cells = [_cell_text(cell) for cell in _cells(tr)]
        if any(cells):
            rows.append(" | ".join(cells))
    return rows


def expand_spans(rows: list[list[Cell]]) -> list[list[str]]:
    """Rows of (text, colspan, rowspan) as rows of texts, a spanned cell repeated into every cell it covers."""
    grid: list[list[str]] = []
    pending: dict[int, tuple[str, int]] = {}  # column -> (text, rows it still covers)
    for cells in rows:
        out: list[str] = []
        queue = list(reversed(cells))
        while queue or len(out) in pending:
            col = len(out)
            if col in pending:
                text, left = pending.pop(col)
                if left > 1:
                    pending[col] = (text, left - 1)
                out.append(text)
                continue
            text, colspan, rowspan = queue.pop()
            for _ in range(colspan):
                if rowspan > 1:
                    pending[len(out)] = (text, rowspan - 1)
                out.append(text)
        grid.append(out)
    return grid


def html_grid(table: Any) -> Grid | None:
    """The grid of a table that is not a layout table, when it is a real one (module doc)."""
    trs = table.css("tr")
    head = [tr for tr in trs if tr.parent is not None and tr.parent.tag == "thead"]
    body = [tr for tr in trs if tr.parent is None or tr.parent.tag not in ("thead", "tfoot")]
    if len(head) > 1:
        return None
    if not head:
        if not body or any(c.tag != "th" for c in _cells(body[0])):
            return None
        head, body = body[:1], body[1:]
    if len(body) > MAX_GRID_ROWS:
        return None
    raw = [[(_cell_text(c), _span(c, "colspan", MAX_COLUMNS + 1), _span(c, "rowspan", MAX_GRID_ROWS))
            for c in _cells(tr)] for tr in (*head, *body)]
    header, *rows = expand_spans(raw)
    caption = table.css_first("caption")
    return real_grid(header, rows, _cell_text(caption) if caption is not None else "")
