"""When a table found in a document is a real table: the rule the HTML and DOCX parsers share.

A real table has exactly one header row and at least `MIN_DATA_ROWS` data rows of at least `MIN_COLUMNS`
columns, every row as wide as the header once spanned cells are repeated into the cells they cover, within
the table store's limits (`MAX_COLUMNS` columns, `MAX_CELL_CHARS` characters a cell), with a header cell that
is not empty. The parsers decide first what a *layout* table is (one used to place content: it nests a table,
its cells hold headings, lists, code or several paragraphs, or it has a single column); a layout table's
content is read as ordinary blocks. A real table is a `table` block whose `grid` goes to the table store,
beside its text in the passage index; any other table is a `table` block of text only.
"""

from __future__ import annotations

from collections.abc import Sequence

from amsrag.ingest.parsers.base import Grid
from amsrag.tables.catalog import MAX_CELL_CHARS, MAX_COLUMNS

MIN_COLUMNS = 2
MIN_DATA_ROWS = 2
MAX_GRID_ROWS = 100_000


def real_grid(header: Sequence[str], rows: Sequence[Sequence[str]], caption: str = "") -> Grid | None:
    """The table as a `Grid` when it passes the rule of the module doc (rows with no text dropped), else None."""
    width = len(header)
    data = [tuple(r) for r in rows if any(c.strip() for c in r)]
    if width < MIN_COLUMNS or width > MAX_COLUMNS or not any(h.strip() for h in header):
        return None
    if len(data) < MIN_DATA_ROWS or len(data) > MAX_GRID_ROWS:
        return None
    if any(len(r) != width for r in data):
        return None
    if any(len(c) > MAX_CELL_CHARS or "\x00" in c for r in (header, *data) for c in r):
        return None
    return Grid(tuple(header), tuple(data), caption)


def grid_text(rows: Sequence[Sequence[str]]) -> str:
    """Rows as `cell | cell` lines (rows with no text left out), the text a table block carries."""
    return "\n".join(" | ".join(r) for r in rows if any(c for c in r))
