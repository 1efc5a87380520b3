"""The real tables of a parsed document (HTML, DOCX) as `Table`s for the table store.

A table block whose parser found it a real table (`amsrag.ingest.parsers.grids`) becomes the table
`<document key>#table-N` (N counts the document's real tables from 1). Its title joins the document's title,
the heading path above the table and its caption; its metadata names the document (`document`: the key,
`source`: the path inside the folder, `type`: the format) and where in it the table stands (`section`, `anchor`,
`page` when known). The table's text stays a passage of the document too.
"""

from __future__ import annotations

from amsrag.ingest.parsers.base import ParsedDocument
from amsrag.ingest.tables import build_table
from amsrag.tables.table import Table
from amsrag.text.citations import SECTION_JOIN

TABLE_MARK = "#table-"


def document_table_id(key: str, n: int) -> str:
    return f"{key}{TABLE_MARK}{n}"


def document_tables(doc: ParsedDocument, key: str, source: str, fmt: str) -> list[Table]:
    """The document's real tables, in document order (module doc)."""
    tables: list[Table] = []
    stack: list[tuple[int, str, str | None]] = []  # the headings above: level, text, anchor
    for block in doc.blocks:
        if block.kind == "heading":
            text = " ".join(block.text.split())
            if text == doc.title and not stack:
                continue  # the title heading: the path starts below it
            while stack and stack[-1][0] >= block.level:
                stack.pop()
            stack.append((block.level, text, block.anchor))
            continue
        grid = block.grid
        if grid is None:
            continue
        table_id = document_table_id(key, len(tables) + 1)
        section = SECTION_JOIN.join(h for _, h, _ in stack)
        title = SECTION_JOIN.join(dict.fromkeys(p for p in (doc.title, section, grid.caption) if p))
        meta = {"document": key, "source": source, "type": fmt, "table": str(len(tables) + 1)}
        if section:
            meta["section"] = section
        if stack and stack[-1][2]:
            meta["anchor"] = str(stack[-1][2])
        if block.page is not None:
            meta["page"] = str(block.page)
        rows = ((f"row {i}", row) for i, row in enumerate(grid.rows, start=1))
        tables.append(build_table(f"{key} ({table_id})", table_id, rows, title, table_id, meta, header=grid.header))
    return tables
