"""Word (.docx) by python-docx and PowerPoint (.pptx) by python-pptx (both MIT; the `documents` extra).

DOCX: paragraphs in body order; styles `Title` / `Heading N` are headings, list styles and numbered
paragraphs (`List …` styles) one list block per run, code styles a code block, tables `cell | cell` rows (with
their grid when real tables; a layout table's content read as blocks: `docx_tables`). No pages (Word
lays them out at display time). PPTX: one page per slide; its title a level-1 heading, its other text
frames text (indented paragraphs as lists), its tables and its notes after them.

Both are zip files: a file that is not one, whose XML parts unzip past the markup budget or whose members
unzip past the file budget (a zip bomb) is skipped before the library opens it.
"""

from __future__ import annotations

import re
import zipfile
from pathlib import Path
from typing import Any

from amsrag.ingest.parsers.base import Block, Grid, ParseBudget, ParsedDocument, SkippedDocument, TextBudget, mib
from amsrag.ingest.parsers.docx_tables import docx_grid, is_layout, layout_blocks, style_name
from amsrag.ingest.parsers.grids import real_grid

_HEADING_STYLE = re.compile(r"^heading\s*(\d)$", re.IGNORECASE)
_CODE_STYLES = ("code", "source", "preformatted", "verbatim", "macro text")


def check_package(path: Path, kind: str, budget: ParseBudget) -> None:
    """SkippedDocument unless `path` is an unbroken Office zip package within the markup budget."""
    try:
        with zipfile.ZipFile(path) as package:
            infos = package.infolist()
            names = {i.filename for i in infos}
            bad = package.testzip() if sum(i.compress_size for i in infos) < (8 << 20) else None
    except zipfile.BadZipFile as exc:
        raise SkippedDocument(path, f"corrupt {kind} (not a valid zip package: {exc})") from None
    except (OSError, EOFError, ValueError, NotImplementedError) as exc:
        raise SkippedDocument(path, f"corrupt {kind} ({exc})") from None
    if bad is not None:
        raise SkippedDocument(path, f"corrupt {kind} (damaged member {bad})")
    if "[Content_Types].xml" not in names:
        raise SkippedDocument(path, f"not a {kind} (a zip without [Content_Types].xml); check the file's extension")
    markup = sum(i.file_size for i in infos if i.filename.endswith((".xml", ".rels")))
    if markup > budget.max_markup_bytes:
        raise SkippedDocument(path, f"its XML unzips to {mib(markup)}, more than ingest.max_markup_mb "
                                    f"({mib(budget.max_markup_bytes)})")
    unpacked = sum(i.file_size for i in infos)
    if unpacked > budget.max_package_bytes:
        raise SkippedDocument(path, f"unzips to {mib(unpacked)}, more than ingest.max_file_mb "
                                    f"({mib(budget.max_package_bytes)})")


def _open_with(path: Path, kind: str, opener: Any) -> Any:
    try:
        return opener(str(path))
    except Exception as exc:  # python-docx / -pptx raise many kinds on a damaged package
        raise SkippedDocument(path, f"corrupt {kind} ({type(exc).__name__}: {exc})") from None


def _docx_rows(table: Any) -> str:
    rows = []
    for row in table.rows:
        cells: list[str] = []
        for cell in row.cells:
            text = " ".join(cell.text.split())
            if not cells or cells[-1] != text:  # a merged cell repeats across the cells it spans
                cells.append(text)
        if any(cells):
            rows.append(" | ".join(cells))
    return "\n".join(rows)


def parse_docx(path: Path, budget: ParseBudget) -> ParsedDocument:
    try:
        import docx
    except ImportError:
        raise SkippedDocument(path, "reading .docx needs the documents extra (pip install 'amsrag[documents]')") \
            from None
    check_package(path, "DOCX", budget)
    document = _open_with(path, "DOCX", docx.Document)
    text_budget = TextBudget(path, budget)
    blocks: list[Block] = []
    pending: list[str] = []  # list items of the current run
    pending_kind = "list"

    def flush() -> None:
        nonlocal pending
        if pending:
            blocks.append(Block(pending_kind, "\n".join(pending)))  # type: ignore[arg-type]
            pending = []

    for item in document.iter_inner_content():
        if not hasattr(item, "style") or hasattr(item, "rows"):
            flush()
            if is_layout(item):
                blocks += layout_blocks(item, text_budget)
                continue
            rows = _docx_rows(item)
            if rows:
                blocks.append(Block("table", text_budget.take(rows), grid=docx_grid(item)))
            continue
        text = text_budget.take(item.text.strip())
        style = style_name(item)
        heading = _HEADING_STYLE.match(style)
        kind = "code" if any(s in style.lower() for s in _CODE_STYLES) else "list" if "list" in style.lower() else ""
        if kind and pending and kind != pending_kind:
            flush()
        if kind:
            pending_kind = kind
            if text:
                pending.append(f"- {text}" if kind == "list" else item.text.rstrip())
            continue
        flush()
        if not text:
            continue
        if style.lower() == "title":
            blocks.append(Block("heading", text, 1))
        elif heading:
            blocks.append(Block("heading", text, int(heading.group(1)) + 1))
        else:
            blocks.append(Block("text", text))
    flush()
    title = " ".join((document.core_properties.title or "").split())
    if not title:
        title = next((b.text for b in blocks if b.kind == "heading"), "") or path.stem
    return ParsedDocument(title=title, blocks=blocks)


def pptx_grid(table: Any) -> Grid | None:
    """A PowerPoint table with its "Header Row" option on, as a grid when it is a real table (`grids`); a merged
    cell's text is repeated into the cells it covers (python-pptx leaves those empty)."""
    if not table.first_row:
        return None
    rows = [[" ".join(c.text.split()) for c in row.cells] for row in table.rows]
    for r, row in enumerate(table.rows):
        for c, cell in enumerate(row.cells):
            if cell.is_merge_origin:
                for covered in rows[r : r + cell.span_height]:
                    covered[c : c + cell.span_width] = [rows[r][c]] * len(covered[c : c + cell.span_width])
    return real_grid(rows[0], rows[1:]) if rows else None


def _shape_blocks(shape: Any, page: int, budget: TextBudget) -> list[Block]:
    if getattr(shape, "has_table", False) and shape.has_table:
        rows = [" | ".join(" ".join(c.text.split()) for c in row.cells) for row in shape.table.rows]
        return [Block("table", budget.take("\n".join(r for r in rows if r.strip(" |"))), 0, page,
                      grid=pptx_grid(shape.table))]
    if getattr(shape, "shape_type", None) is not None and hasattr(shape, "shapes"):  # a group
        return [b for sub in shape.shapes for b in _shape_blocks(sub, page, budget)]
    if not getattr(shape, "has_text_frame", False) or not shape.has_text_frame:
        return []
    lines = [("  " * p.level + "- " if p.level else "") + " ".join(p.text.split())
             for p in shape.text_frame.paragraphs if p.text.strip()]
    if not lines:
        return []
    kind = "list" if any(p.level for p in shape.text_frame.paragraphs) or len(lines) > 1 else "text"
    return [Block(kind, budget.take("\n".join(lines)), 0, page)]  # type: ignore[arg-type]


def parse_pptx(path: Path, budget: ParseBudget) -> ParsedDocument:
    try:
        import pptx
    except ImportError:
        raise SkippedDocument(path, "reading .pptx needs the documents extra (pip install 'amsrag[documents]')") \
            from None
    check_package(path, "PPTX", budget)
    deck = _open_with(path, "PPTX", pptx.Presentation)
    slides = list(deck.slides)
    if len(slides) > budget.max_pages:
        raise SkippedDocument(path, f"{len(slides):,} slides, more than ingest.max_pages ({budget.max_pages:,})")
    text_budget = TextBudget(path, budget)
    blocks: list[Block] = []
    for number, slide in enumerate(slides, start=1):
        title_shape = slide.shapes.title
        title = " ".join(title_shape.text.split()) if title_shape is not None and title_shape.has_text_frame else ""
        blocks.append(Block("heading", text_budget.take(title or f"Slide {number}"), 1, number))
        for shape in slide.shapes:
            if title_shape is not None and shape.shape_id == title_shape.shape_id:
                continue
            blocks.extend(_shape_blocks(shape, number, text_budget))
        if slide.has_notes_slide and slide.notes_slide.notes_text_frame is not None:
            notes = slide.notes_slide.notes_text_frame.text.strip()
            if notes:
                blocks.append(Block("text", text_budget.take(notes), 0, number))
    title = " ".join((deck.core_properties.title or "").split()) or path.stem
    return ParsedDocument(title=title, blocks=blocks, pages=len(slides))
