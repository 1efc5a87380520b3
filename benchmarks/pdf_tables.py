"""Tables in PDFs (issue 38): which finder, and what it costs a page of text.

1. **Finders** over a hand-labelled set of real PDF pages (LABELS: the real tables each page holds, counted from
   its rendering, with their column counts; sources and sha256 in docs/benchmarks/parsers.md §7). A finder's table
   is a hit when a labelled table of its page has its number of columns (a table cut to some of its columns is
   not).
   The shipped row is `parse_pdf` itself (its table blocks, a later page's part of a table included; seconds are
   the whole parse); the finder rows count every table of 2+ columns and 3+ rows a finder gives, header or not:
   pdfplumber's `lines` strategy with the open sides of borderless tables drawn in, plain `lines`, its `text`
   strategy (word alignment) and lines across with text down (booktabs-style rules). CPU seconds per page.
2. **The gate**: which labelled pages `pdf_tables.worth_searching` sends to the finder.
3. **Cost on text PDFs**: `parse_pdf` on the same files with the extra and with pdfplumber blocked (the path of an
   install without the extra), alternating, CPU seconds; and the blocks each gives (text-only PDFs: the same).
4. **The gate's cost**: its CPU time against PDFium's text extraction of the same pages (the text set).
5. **Cells**: the shipped path's cells against cells transcribed by hand from the rendered pages (CELLS).

    PYTHONPATH=src OMP_NUM_THREADS=1 python benchmarks/pdf_tables.py --root /tmp/pdft/set --text /tmp/pdft/text
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

# file -> {page (1-based): the column count of each real table on it}; pages not named hold none. Counted from
# each page's rendering.
LABELS: dict[str, dict[int, list[int]]] = {
    "150109DSP-Milw-505-90D.pdf": {},  # a filled-in form: ruled boxes and check boxes, no table
    "2023-06-20-PV.pdf": {},  # minutes
    "WARN-Report-for-7-1-2015-to-03-25-2016.pdf": {**{p: [7] for p in range(1, 15)}, 15: [7, 9], 16: [9]},
    "cupertino_usd_4-6-16.pdf": {},  # an agenda in a ruled box
    "federal-register-2020-17221.pdf": {5: [5], 6: [5]},  # three-column prose; a cost table over pages 5-6
    "issue-140-example.pdf": {1: [9]},  # one filled table; four header-only ("No records") tables do not count
    "issue-33-lorem-ipsum.pdf": {1: [7], 2: [4]},  # LaTeX tabular with full rules
    "la-precinct-bulletin-2014-p1.pdf": {},  # a columnar election report without rules or a header row
    "nics-background-checks-2015-11.pdf": {1: [25]},  # two header rows, rows banded in fives
    "pdffill-demo.pdf": {},  # drawings: arrows, shapes, line styles
    "scotus-transcript-p1.pdf": {},
    "senate-expenditures.pdf": {1: [7]},  # rotated page, no rules between data rows
    "table-curves-example.pdf": {1: [4]},
    "booktabs.pdf": {2: [3, 3, 3]},  # the booktabs manual: three example tables (horizontal rules only)
    "debian-reference-p30-33.pdf": {3: [4], 4: [4]},  # DocBook tables without outer borders (the test fixture)
}

# Hand-transcribed cells (file, page, table n on the page from 0, [header, row 1, ...]) for the cell check.
CELLS: list[tuple[str, int, int, list[list[str]]]] = [
    ("WARN-Report-for-7-1-2015-to-03-25-2016.pdf", 1, 0, [  # the first six columns of the first three rows
        ["Notice Date", "Effective", "Received", "Company", "City", "No. Of", "Layoff/Closure"],
        ["06/22/2015", "03/25/2016", "07/01/2015", "Maxim Integrated Product", "San Jose", "150"],
        ["06/30/2015", "08/29/2015", "07/01/2015", "McGraw-Hill Education", "Monterey", "137"],
        ["06/30/2015", "08/30/2015", "07/01/2015", "Long Beach Memorial Medical Center", "Long Beach", "90"],
    ]),
    ("issue-140-example.pdf", 1, 0, [
        ["Line no", "UPC code", "Location", "Item Description", "Item Quantity", "Bill Amount", "Accrued Amount",
         "Handling Rate", "PO number"],
        ["", "0085648100305", "CENTRAL KMA", "LILYS 40% SLTD ALMND CHOC", "637", "$ 0.61", "$ 388.57", "0.0000",
         ""],
    ]),
    ("nics-background-checks-2015-11.pdf", 1, 0, [
        ["State / Territory", "Permit", "Handgun", "Long Gun"],
        ["Alabama", "18,870", "23,022", "22,650"],
        ["Alaska", "209", "3,062", "3,209"],
    ]),
    ("issue-33-lorem-ipsum.pdf", 2, 0, [
        ["0.47", "0.40", "0.03", "0.31"],
        ["0.60", "0.07", "0.60", "0.42"],
        ["0.55", "0.56", "0.52", "0.20"],
        ["0.51", "0.35", "0.53", "0.50"],
    ]),
]

STRATEGIES: dict[str, Any] = {
    "shipped: parse_pdf (gate, lines + open sides, pages joined)": "parser",
    "lines + open sides, every page": "shipped",
    "lines": {"vertical_strategy": "lines", "horizontal_strategy": "lines"},
    "text": {"vertical_strategy": "text", "horizontal_strategy": "text"},
    "lines-across/text-down": {"vertical_strategy": "text", "horizontal_strategy": "lines"},
}


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _searched(doc: Any, index: int) -> bool:
    from amsrag.ingest.parsers.pdf_tables import worth_searching

    page = doc[index]
    textpage = page.get_textpage()
    try:
        return worth_searching(page, textpage.count_chars())
    finally:
        textpage.close()
        page.close()


def _page_count(path: Path) -> int:
    import pypdfium2 as pdfium

    doc = pdfium.PdfDocument(str(path))
    try:
        return len(doc)
    finally:
        doc.close()


def _parsed_widths(path: Path) -> tuple[dict[int, list[int]], float]:
    """The widths of the table blocks `parse_pdf` gives each page (a table's part on a later page counts as a
    table of its page), and the CPU seconds of the parse."""
    seconds, blocks = _parse_blocks(path)
    widths: dict[int, list[int]] = {}
    for block in blocks:
        if block.kind == "table" and block.page is not None:
            width = len(block.grid.header) if block.grid else block.text.splitlines()[0].count(" | ") + 1
            widths.setdefault(block.page, []).append(width)
    return widths, seconds


def _width(table: Any) -> int:
    """A found table's width when it has the shape of a table (2+ columns, 3+ rows, its first row as a header
    or not: a finder's job is the grid; whether a row is a header is the parser's), else 0."""
    from amsrag.ingest.parsers.grids import MIN_COLUMNS
    from amsrag.ingest.parsers.pdf_tables import read_table

    read = read_table(table, (0.0, 0.0, 0.0, 0.0))
    if read is None:
        return 0
    width = len(read.header) if read.header is not None else len(read.rows[0])
    rows = len(read.rows) + (read.header is not None)
    return width if width >= MIN_COLUMNS and rows >= 3 else 0


def finders(root: Path) -> dict[str, Any]:
    import pdfplumber

    from amsrag.ingest.parsers.pdf_tables import page_tables

    out: dict[str, Any] = {}
    for name, settings in STRATEGIES.items():
        found = present = hits = pages = 0
        cpu = 0.0
        for file, labels in LABELS.items():
            if settings == "parser":
                widths, seconds = _parsed_widths(root / file)
                cpu += seconds
            else:
                widths = {}
                with pdfplumber.open(root / file) as pdf:
                    for number, page in enumerate(pdf.pages, start=1):
                        start = time.process_time()
                        found_here = page_tables(page) if settings == "shipped" else page.find_tables(settings)
                        widths[number] = [w for w in (_width(t) for t in found_here) if w]
                        cpu += time.process_time() - start
                        page.close()
            for number in range(1, _page_count(root / file) + 1):
                want = list(labels.get(number, []))
                hit = 0
                for width in widths.get(number, []):  # a hit: a labelled table of the same width not matched yet
                    if width in want:
                        want.remove(width)
                        hit += 1
                present += len(labels.get(number, []))
                found, hits, pages = found + len(widths.get(number, [])), hits + hit, pages + 1
        out[name] = {"pages": pages, "found": found, "present": present, "hits": hits,
                     "precision": round(hits / found, 3) if found else None, "recall": round(hits / present, 3),
                     "cpu_s_per_page": round(cpu / pages, 4)}
        print(name, out[name], flush=True)
    return out


def gate(root: Path) -> dict[str, Any]:
    import pypdfium2 as pdfium


    searched = {"with_tables": 0, "without": 0}
    pages = {"with_tables": 0, "without": 0}
    for file, labels in LABELS.items():
        doc = pdfium.PdfDocument(str(root / file))
        for index in range(len(doc)):
            kind = "with_tables" if labels.get(index + 1) else "without"
            pages[kind] += 1
            searched[kind] += _searched(doc, index)
        doc.close()
    return {"pages": pages, "searched": searched}


def _parse_blocks(path: Path) -> tuple[float, list[Any]]:
    from amsrag.ingest.parsers.base import ParseBudget
    from amsrag.ingest.parsers.pdf import parse_pdf

    start = time.process_time()
    doc = parse_pdf(path, ParseBudget())
    return time.process_time() - start, doc.blocks


def _parse(path: Path) -> tuple[float, list[tuple[str, str, int | None]]]:
    seconds, blocks = _parse_blocks(path)
    return seconds, [(b.kind, b.text, b.page) for b in blocks]


def _without_extra(run: Callable[[], Any]) -> Any:
    saved = sys.modules.get("pdfplumber")
    sys.modules["pdfplumber"] = None  # type: ignore[assignment]  # how an absent extra looks to `installed`
    try:
        return run()
    finally:
        if saved is None:
            del sys.modules["pdfplumber"]
        else:
            sys.modules["pdfplumber"] = saved


def text_cost(files: list[Path], rounds: int) -> dict[str, Any]:
    """CPU seconds of `parse_pdf` with and without the extra, over all files and over the files none of whose
    pages the gate sends to the finder (what a PDF of prose pays: the gate alone)."""
    import pypdfium2 as pdfium

    on = off = unsearched_on = unsearched_off = 0.0
    same = unsearched = 0
    pages = searched = 0
    changed: list[str] = []
    for path in files:
        doc = pdfium.PdfDocument(str(path))
        pages += len(doc)
        here = sum(_searched(doc, i) for i in range(len(doc)))
        searched += here
        doc.close()
        for _ in range(rounds):
            t_off, blocks_off = _without_extra(partial(_parse, path))
            t_on, blocks_on = _parse(path)
            off, on = off + t_off, on + t_on
            if not here:
                unsearched_off, unsearched_on = unsearched_off + t_off, unsearched_on + t_on
        unsearched += not here
        if blocks_on == blocks_off:
            same += 1
        else:
            changed.append(path.name)
    return {"files": len(files), "pages": pages, "pages_searched": searched, "rounds": rounds,
            "cpu_s_without_extra": round(off, 2), "cpu_s_with_extra": round(on, 2), "ratio": round(on / off, 3),
            "files_none_searched": unsearched, "ratio_files_none_searched":
                round(unsearched_on / unsearched_off, 3) if unsearched_off else None,
            "files_same_blocks": same, "files_with_tables_found": changed}


def gate_cost(files: list[Path]) -> dict[str, Any]:
    """CPU seconds of the gate against PDFium's text extraction of the same pages (both on a loaded page)."""
    import pypdfium2 as pdfium

    from amsrag.ingest.parsers.pdf_tables import worth_searching

    text = gate = 0.0
    pages = 0
    for path in files:
        doc = pdfium.PdfDocument(str(path))
        for index in range(len(doc)):
            page = doc[index]
            start = time.process_time()
            textpage = page.get_textpage()
            textpage.get_text_range()
            chars = textpage.count_chars()
            textpage.close()
            middle = time.process_time()
            worth_searching(page, chars)
            gate += time.process_time() - middle
            text += middle - start
            page.close()
            pages += 1
        doc.close()
    return {"pages": pages, "cpu_s_text": round(text, 3), "cpu_s_gate": round(gate, 3),
            "gate_ms_per_page": round(1000 * gate / pages, 3), "ratio": round(gate / text, 3)}


def cells(root: Path) -> dict[str, Any]:
    """Cells of the parser's table blocks against CELLS, over the tables it takes (a table it leaves as text, such
    as one without a header row, is listed apart)."""
    from amsrag.ingest.parsers.base import ParseBudget
    from amsrag.ingest.parsers.pdf import parse_pdf

    right = total = 0
    per: dict[str, str] = {}
    for file, page, n, want in CELLS:
        doc = parse_pdf(root / file, ParseBudget())
        grids = [b.grid for b in doc.blocks if b.kind == "table" and b.page == page and b.grid is not None]
        if len(grids) <= n:
            per[f"{file} p{page}"] = "not taken as a table"
            continue
        got = [list(grids[n].header), *map(list, grids[n].rows)]
        ok = sum(1 for r, row in enumerate(want) for c, cell in enumerate(row)
                 if r < len(got) and c < len(got[r]) and got[r][c] == cell)
        size = sum(len(row) for row in want)
        right, total = right + ok, total + size
        per[f"{file} p{page}"] = f"{ok}/{size}"
    return {"cells_right": right, "cells": total, "accuracy": round(right / total, 3), "per_table": per}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=Path, required=True, help="folder holding the labelled PDFs (LABELS)")
    parser.add_argument("--text", type=Path, required=True, help="folder of PDFs for the cost on text pages")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("docs/benchmarks/pdf_tables.json"))
    args = parser.parse_args()
    text_files = sorted(args.text.glob("*.pdf"))
    result = {
        "labelled": {f: sha256(args.root / f) for f in LABELS},
        "text_set": {p.name: sha256(p) for p in text_files},
        "finders": finders(args.root),
        "gate": gate(args.root),
        "cells": cells(args.root),
        "labelled_cost": text_cost([args.root / f for f in LABELS], args.rounds),
        "text_cost": text_cost(text_files, args.rounds),
        "gate_cost": gate_cost(text_files),
    }
    args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(json.dumps({k: v for k, v in result.items() if k not in ("labelled", "text_set")}, indent=1))


if __name__ == "__main__":
    main()
