"""PDF text by page with pypdfium2 (PDFium: BSD-3 / Apache-2.0), sections from the PDF outline.

Per page: PDFium's text in reading order, its soft-hyphen markers removed (PDFium joins a word broken at a
line end and marks the break), a word broken with a real hyphen at a line end joined unless the document
spells it hyphenated elsewhere, and running headers and footers (lines at the top or bottom of a page that
recur on several pages with their page number, or on a third of them) dropped. The outline (bookmarks)
gives the headings: each entry's title is looked for on its page and the page split there. A file without a
text layer, and the pages without any text in one that has it, are read by OCR with the `ocr` extra (`ocr`).
With the `pdf-tables` extra, a ruled table that is a real table (`pdf_tables`) is a `table` block with its grid
at its place on the page, and its text is no longer among the page's lines.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from amsrag.ingest.parsers import pdf_tables
from amsrag.ingest.parsers.base import Block, Grid, ParseBudget, ParsedDocument, SkippedDocument, TextBudget
from amsrag.ingest.parsers.grids import grid_text, real_grid

_SOFT_HYPHENS = re.compile("[\ufffe\x02\u00ad]")
_LINE_HYPHEN = re.compile(r"(\w+)-\n(\w+)")
_DIGITS = re.compile(r"\d+")
_EDGE_LINES = 2  # lines at the top and at the bottom of a page that may be running heads / feet
_MIN_REPEATS = 3
_RUNNING_SHARE = 0.3
_MIN_TEXT_PER_PAGE = 8  # letters and digits per page below which the file has no text layer
_TABLE_MARK = "\ue000"  # a private-use character: a line `<mark>N<mark>` holds the place of the page's table N
_TABLE_LINE = re.compile(rf"^{_TABLE_MARK}(\d+){_TABLE_MARK}$", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class OutlineEntry:
    level: int  # 1 = top
    title: str
    page: int  # 1-based


def _open(path: Path) -> Any:
    import pypdfium2 as pdfium

    head = path.open("rb").read(1024)
    if b"%PDF-" not in head:
        raise SkippedDocument(path, "not a PDF (no %PDF- header in its first 1 KiB); check the file's extension")
    try:
        return pdfium.PdfDocument(str(path))
    except pdfium.PdfiumError as exc:
        if "password" in str(exc).lower():
            raise SkippedDocument(path, "encrypted (the PDF needs a password)") from None
        raise SkippedDocument(path, f"corrupt PDF ({exc})") from None


def _outline(doc: Any, pages: int) -> list[OutlineEntry]:
    entries: list[OutlineEntry] = []
    try:
        for item in doc.get_toc(max_depth=6):
            dest = item.get_dest()
            index = dest.get_index() if dest is not None else None
            title = " ".join(item.get_title().split())
            if index is not None and 0 <= index < pages and title:
                entries.append(OutlineEntry(item.level + 1, title, index + 1))
    except Exception:  # a damaged outline costs the headings, not the text
        return []
    return entries


def _lines(text: str) -> list[str]:
    text = _SOFT_HYPHENS.sub("", text.replace("\r\n", "\n").replace("\r", "\n"))
    return [line.rstrip() for line in text.split("\n")]


def _page_lines(doc: Any, index: int, ruled: set[int] | None = None) -> list[str]:
    """The page's lines; its index added to `ruled` when given and the page draws a ruled grid (`pdf_tables`)."""
    page = doc[index]
    try:
        textpage = page.get_textpage()
        try:
            text = textpage.get_text_range()
            if ruled is not None and pdf_tables.worth_searching(page, textpage.count_chars()):
                ruled.add(index)
        finally:
            textpage.close()
    finally:
        page.close()
    return _lines(text)


def _text_in(textpage: Any, box: tuple[float, float, float, float]) -> str:
    return str(textpage.get_text_bounded(*box))


def _inside(x: float, y: float, box: tuple[float, float, float, float]) -> bool:
    return box[0] <= x <= box[2] and box[1] <= y <= box[3]


def _lines_around(page: Any, boxes: Sequence[tuple[float, float, float, float]]) -> list[str]:
    """The page's lines without the characters inside `boxes`; the line `<mark>N<mark>` where box N's first
    character stood (PDFium's generated spaces and line breaks go with the character before them)."""
    import pypdfium2.raw as pdfium_c

    textpage = page.get_textpage()
    try:
        parts: list[str] = []
        placed: set[int] = set()
        start, current = 0, None  # the run of characters with the same place (None: outside every table)
        count = textpage.count_chars()

        def close_run(end: int) -> None:
            if current is None and end > start:
                parts.append(textpage.get_text_range(start, end - start))

        for k in range(count):
            where = current
            if not pdfium_c.FPDFText_IsGenerated(textpage.raw, k):
                left, bottom, right, top = textpage.get_charbox(k)
                x, y = (left + right) / 2, (bottom + top) / 2
                where = next((n for n, box in enumerate(boxes) if _inside(x, y, box)), None)
            if where != current:
                close_run(k)
                if where is not None and where not in placed:
                    placed.add(where)
                    parts.append(f"\n{_TABLE_MARK}{where}{_TABLE_MARK}\n")
                start, current = k, where
        close_run(count)
        parts += [f"\n{_TABLE_MARK}{n}{_TABLE_MARK}\n" for n in range(len(boxes)) if n not in placed]
    finally:
        textpage.close()
    return _lines("".join(parts))


@dataclass(slots=True)
class _Joined:
    """A table as it goes to the table store: its header, its rows from every page it runs over, and where each
    part of it stands (page, index among that page's found tables, its own rows)."""

    header: tuple[str, ...]
    caption: str
    rows: list[tuple[str, ...]]
    parts: list[tuple[int, int, tuple[tuple[str, ...], ...]]]


def _join_pages(found: dict[int, list[pdf_tables.PageTable]]) -> list[_Joined]:
    """Tables with a header, each followed by the headerless first table of the next page when it is as wide
    and the table was the last on its page: a table that runs over pages is one table."""
    joined: list[_Joined] = []
    last: tuple[int, _Joined] | None = None  # the last table of the last page read, and its page
    for index in sorted(found):
        for n, table in enumerate(found[index]):
            if table.header is not None:
                joined.append(_Joined(table.header, table.caption, list(table.rows), [(index, n, table.rows)]))
                last = (index, joined[-1])
            elif n == 0 and last is not None and last[0] == index - 1 and len(last[1].header) == len(table.rows[0]):
                last[1].rows += table.rows
                last[1].parts.append((index, n, table.rows))
                last = (index, last[1])
    return joined


def _find_tables(path: Path, doc: Any, page_lines: list[list[str]], ruled: Iterable[int],
                 notice: Callable[[str], None] | None = None) -> dict[int, list[tuple[str, Grid | None]]]:
    """The real tables of the `ruled` pages (`pdf_tables`) as (text, grid) by 0-based page, in page order: a
    table over several pages has its grid on its first part and text only on the others. Their pages' lines in
    `page_lines` are replaced by the lines around them."""
    found: dict[int, list[pdf_tables.PageTable]] = {}
    try:
        with pdf_tables.PageTables(path) as finder:
            for index in sorted(ruled):
                page = doc[index]
                textpage = page.get_textpage()
                try:
                    tables = finder.find(index, page.get_rotation(), tuple(page.get_mediabox()),
                                         partial(_text_in, textpage))
                finally:
                    textpage.close()
                    page.close()
                if tables:
                    found[index] = tables
    except Exception as exc:  # pdfminer fails on a file PDFium reads: its tables stay text
        if notice is not None:
            notice(f"{path.name}: tables not read ({type(exc).__name__}: {exc}); they stay text")
        return {}
    placed: dict[int, dict[int, tuple[str, Grid | None]]] = {}
    for table in _join_pages(found):
        grid = real_grid(table.header, table.rows, table.caption)
        if grid is None:
            continue
        for k, (index, n, rows) in enumerate(table.parts):
            text = grid_text([table.header, *rows] if k == 0 else rows)
            placed.setdefault(index, {})[n] = (text, grid if k == 0 else None)
    out: dict[int, list[tuple[str, Grid | None]]] = {}
    for index, by_position in placed.items():
        order = sorted(by_position)
        page = doc[index]
        try:
            page_lines[index] = _lines_around(page, [found[index][n].box for n in order])
        finally:
            page.close()
        out[index] = [by_position[n] for n in order]
    return out


def _edge_key(line: str) -> str:
    return _DIGITS.sub("#", " ".join(line.lower().split()))


def _edges(lines: Sequence[str]) -> list[str]:
    filled = [line for line in lines if line.strip()]
    return filled[:_EDGE_LINES] + filled[-_EDGE_LINES:]


def running_lines(pages: Sequence[Sequence[str]]) -> set[str]:
    """Keys of the lines that recur at the top or bottom of pages: running heads and feet, which carry the
    page number (the same line but for its digits) or stand on at least `_RUNNING_SHARE` of the pages. A
    line repeated on a few pages without a number (a slide built up over several pages) is content."""
    if len(pages) < _MIN_REPEATS + 1:
        return set()
    counts: Counter[str] = Counter()
    forms: dict[str, set[str]] = {}
    for lines in pages:
        edge = {" ".join(line.split()) for line in _edges(lines) if len(line.split()) <= 12}
        for line in edge:
            key = _edge_key(line)
            counts[key] += 1
            forms.setdefault(key, set()).add(line.lower())
    often = max(_MIN_REPEATS, _RUNNING_SHARE * len(pages))
    return {key for key, n in counts.items() if n >= _MIN_REPEATS and (len(forms[key]) > 1 or n >= often)}


def _strip_running(lines: list[str], running: set[str]) -> list[str]:
    if not running:
        return lines
    edges = set(_edges(lines))
    return [line for line in lines if not (line in edges and _edge_key(line) in running)]


def dehyphenate(text: str, hyphenated: set[str]) -> str:
    """`exam-\\nple` -> `example`, unless the document writes `exam-ple` elsewhere (a compound)."""

    def join(m: re.Match[str]) -> str:
        left, right = m.group(1), m.group(2)
        if not right[0].islower() or f"{left}-{right}".lower() in hyphenated:
            return m.group(0)
        return left + right

    return _LINE_HYPHEN.sub(join, text)


def _hyphenated_words(pages: Iterable[Sequence[str]]) -> set[str]:
    words: set[str] = set()
    for lines in pages:
        for line in lines:
            words.update(w.lower() for w in re.findall(r"\w+-\w+", line))
    return words


def _title_patterns(title: str) -> tuple[re.Pattern[str], re.Pattern[str]]:
    """The title at a line start (after a section number like `1.2.5` or `A.1`), else anywhere."""
    words = r"\s+".join(re.escape(w) for w in title.split())
    at_line = re.compile(rf"(?:^|(?<=\n))[ \t]*(?:[0-9A-Z]{{1,3}}(?:\.[0-9]{{1,3}})*\.?[ \t]+)?{words}", re.IGNORECASE)
    return at_line, re.compile(words, re.IGNORECASE)


def _place_tables(blocks: list[Block], tables: Sequence[tuple[str, Grid | None]]) -> list[Block]:
    """Text blocks split at the `<mark>N<mark>` lines, the table block of table N (its text, its grid) there."""
    if not tables:
        return blocks
    out: list[Block] = []
    for block in blocks:
        if block.kind != "text" or _TABLE_MARK not in block.text:
            out.append(block)
            continue
        cursor = 0
        for m in _TABLE_LINE.finditer(block.text):
            before = block.text[cursor : m.start()].strip()
            if before:
                out.append(Block("text", before, 0, block.page))
            text, grid = tables[int(m.group(1))]
            out.append(Block("table", text, 0, block.page, grid=grid))
            cursor = m.end()
        rest = block.text[cursor:].strip()
        if rest:
            out.append(Block("text", rest, 0, block.page))
    return out


def _page_blocks(text: str, page: int, entries: Sequence[OutlineEntry]) -> list[Block]:
    """The page's text split at the outline entries that start on it (their titles found in the text)."""
    blocks: list[Block] = []
    cursor = 0
    for entry in entries:
        at_line, anywhere = _title_patterns(entry.title)
        m = at_line.search(text, cursor) or anywhere.search(text, cursor)
        if m is None:  # the title is not printed as such: the section starts where the text stands
            blocks.append(Block("heading", entry.title, entry.level, page))
            continue
        before = text[cursor : m.start()].strip()
        if before:
            blocks.append(Block("text", before, 0, page))
        blocks.append(Block("heading", entry.title, entry.level, page))
        cursor = m.end()
    rest = text[cursor:].strip()
    if rest:
        blocks.append(Block("text", rest, 0, page))
    return blocks


def _info_title(doc: Any) -> str:
    try:
        title = doc.get_metadata_value("Title")
    except Exception:  # no or broken info dictionary
        return ""
    return " ".join(str(title or "").split())


def _has_text(page_lines: Sequence[Sequence[str]], pages: int) -> bool:
    letters = sum(sum(c.isalnum() for c in line) for lines in page_lines for line in lines)
    return letters >= _MIN_TEXT_PER_PAGE * max(pages, 1)


def _ocr(path: Path, doc: Any, pages: int, budget: ParseBudget,
         notice: Callable[[str], None] | None = None) -> list[list[str]]:
    """The lines of every page of a PDF without a text layer, read by OCR (`ocr`); SkippedDocument when OCR is
    off, not installed, over its page budget or finds no text either."""
    from amsrag.ingest.parsers import ocr
    from amsrag.lazy import extra_hint

    scanned = "no text layer (an image-only or scanned PDF"
    if budget.ocr_pages == 0:
        raise SkippedDocument(path, f"{scanned}; OCR is off: ingest.ocr_max_pages = 0)")
    if not ocr.available():
        raise SkippedDocument(path, f"{scanned}; {extra_hint('ocr')} reads it by OCR)")
    if pages > budget.ocr_pages:
        raise SkippedDocument(path, f"{scanned} of {pages:,} pages, more than ingest.ocr_max_pages "
                                    f"({budget.ocr_pages:,}) to read by OCR)")
    page_lines = []
    for index in range(pages):
        if notice is not None:
            notice(f"{path.name}: no text layer, reading page {index + 1} of {pages} by OCR")
        page = doc[index]
        try:
            page_lines.append(ocr.page_lines(page))
        except ocr.OcrUnavailable as exc:
            raise SkippedDocument(path, f"{scanned}; the OCR engine did not load: {exc})") from None
        finally:
            page.close()
    if not _has_text(page_lines, pages):
        raise SkippedDocument(path, f"{scanned}; OCR found no text either)")
    return page_lines


def _ocr_scanned_pages(path: Path, doc: Any, page_lines: list[list[str]], budget: ParseBudget,
                       notice: Callable[[str], None] | None = None) -> list[list[str]]:
    """OCR of the pages without any text in a PDF that has a text layer elsewhere (a scanned appendix, a signed
    page), when the `ocr` extra is installed and `ingest.ocr_max_pages` allows them all; their lines replace the
    empty ones in `page_lines`. Returns the lines read. A failing engine leaves those pages empty (the rest of the
    file stands) and says so."""
    from amsrag.ingest.parsers import ocr

    scanned = [i for i, lines in enumerate(page_lines) if not any(c.isalnum() for line in lines for c in line)]
    if not scanned or budget.ocr_pages == 0 or not ocr.available():
        return []
    say = notice or (lambda message: None)
    if len(scanned) > budget.ocr_pages:
        say(f"{path.name}: {len(scanned)} pages without a text layer left unread (more than ingest.ocr_max_pages, "
            f"{budget.ocr_pages})")
        return []
    read: list[list[str]] = []
    for n, index in enumerate(scanned, start=1):
        say(f"{path.name}: page {index + 1} has no text layer, reading it by OCR ({n} of {len(scanned)})")
        page = doc[index]
        try:
            page_lines[index] = ocr.page_lines(page)
        except ocr.OcrUnavailable as exc:
            say(f"{path.name}: {len(scanned)} pages without a text layer left unread: the OCR engine did not load "
                f"({exc})")
            return read
        finally:
            page.close()
        read.append(page_lines[index])
    return read


def parse_pdf(path: Path, budget: ParseBudget, notice: Callable[[str], None] | None = None) -> ParsedDocument:
    doc = _open(path)
    try:
        pages = len(doc)
        if pages > budget.max_pages:
            raise SkippedDocument(path, f"{pages:,} pages, more than ingest.max_pages ({budget.max_pages:,})")
        text_budget = TextBudget(path, budget)
        ruled: set[int] | None = set() if pdf_tables.available() else None
        page_lines = [_page_lines(doc, i, ruled) for i in range(pages)]
        for lines in page_lines:
            text_budget.take("\n".join(lines))
        tables: dict[int, list[tuple[str, Grid | None]]] = {}
        if not _has_text(page_lines, pages):
            page_lines = _ocr(path, doc, pages, budget, notice)
            for lines in page_lines:
                text_budget.take("\n".join(lines))
            text_lines = page_lines
        else:
            scanned = {i for i, lines in enumerate(page_lines) if not any(line.strip() for line in lines)}
            for lines in _ocr_scanned_pages(path, doc, page_lines, budget, notice):
                text_budget.take("\n".join(lines))
            text_lines = list(page_lines)
            if ruled:
                tables = _find_tables(path, doc, text_lines, ruled - scanned, notice)
        outline = _outline(doc, pages)
        title = _info_title(doc)
    finally:
        doc.close()
    running = running_lines(page_lines)
    if all(not any(line.strip() for line in _strip_running(lines, running)) for lines in page_lines):
        running = set()  # nothing but repeated lines (a template, a test sheet): they are its content
    hyphenated = _hyphenated_words(page_lines)
    by_page: dict[int, list[OutlineEntry]] = {}
    for entry in outline:
        by_page.setdefault(entry.page, []).append(entry)
    blocks: list[Block] = []
    for number, lines in enumerate(text_lines, start=1):
        text = dehyphenate("\n".join(_strip_running(lines, running)), hyphenated)
        blocks.extend(_place_tables(_page_blocks(text, number, by_page.get(number, ())), tables.get(number - 1, ())))
    return ParsedDocument(title=title or path.stem, blocks=blocks, pages=pages)
