"""Table files as `Table`s: CSV, TSV, Excel (.xlsx), SQLite databases and JSONL table records.

* CSV: the delimiter is sniffed (`,` `;` tab `|`, falling back to `,`); WikiTableQuestions' CSV
  escaping (`\\"` and `\\\\` instead of doubled quotes) is detected (or forced with `wtq=True`).
  TSV: tab-separated, with the same escaping rules.
* Excel: every non-empty sheet is a table, id `<file id>#<sheet>`; dates become ISO strings, whole
  numbers lose their `.0`.
* SQLite (.sqlite / .db): every user table, id `<file id>#<table>`, column names from the schema.
* JSONL: lines `{"table": {"id", "title"?, "columns": [...], "rows": [[...]], "metadata"?}}`
  (`read_jsonl_tables`); lines without "table" (passages) are left to the passage reader.

The first non-empty row is the header (empty names become "column N", repeats get " 2", ...). A row
with fewer cells than the header is padded with '' and counted (`Table.padded_rows`, reported as
`table_rows_padded` by index jobs); a row with more (non-empty) cells is an error naming the file and
row. A CSV quote left open at the end of the file is an error naming the line where it opened.
Cells are stripped. Limits: `MAX_ROWS` rows, `MAX_COLUMNS` columns,
`MAX_CELL_CHARS` characters a cell. Every error is an `InputError` naming the file and, where it
applies, the row (the line in a CSV) and the column. A file's id is like a passage's document id:
`<root name>/<path relative to root>` when it was found under an input folder `root`, else its
file name.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from amsrag.errors import InputError
from amsrag.ingest.readers import iter_jsonl
from amsrag.tables.catalog import MAX_CELL_CHARS, MAX_COLUMNS
from amsrag.tables.table import Table, column_headers

MAX_ROWS = 1_000_000
TABLE_SUFFIXES: tuple[str, ...] = (".csv", ".tsv", ".xlsx", ".sqlite", ".db")
SNIFF_BYTES = 64 * 1024
CSV_DELIMITERS = ",;\t|"


# ---------------------------------------------------------------------------------------------- ids
def table_file_id(path: Path, root: Path | None = None, root_name: str | None = None) -> str:
    """`<root name>/<relative path>` for a file under `root` (the root's own name unless `root_name`),
    else the file's name."""
    if root is None:
        return path.name
    if root.is_file():
        return root_name or path.name
    try:
        rel = path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        raise InputError(f"{path} is not inside the input folder {root}") from None
    return f"{root_name or root.resolve().name or 'root'}/{rel}"


def title_of(path: Path) -> str:
    """A title from the file name: "sales_2023-q1.csv" -> "sales 2023 q1"."""
    return " ".join(path.stem.replace("_", " ").replace("-", " ").split())


# ------------------------------------------------------------------------------------------ shared
def cell_text(value: object) -> str:
    """A cell as text: '' for None, ISO dates, whole floats without '.0'."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, dt.datetime):
        if value.time() == dt.time(0, 0) and value.tzinfo is None:
            return value.date().isoformat()
        return value.isoformat(sep=" ")
    if isinstance(value, (dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 1e16:
            return str(int(value))
        return repr(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, dt.timedelta):
        return str(value)
    return str(value).strip()


def build_table(where: str, table_id: str, rows: Iterable[tuple[str, Sequence[object]]], title: str = "",
                source: str = "", metadata: dict[str, str] | None = None, header: Sequence[str] | None = None
                ) -> Table:
    """A Table from (row label for errors, cells) pairs: the first non-empty row is the header unless
    `header` is given; padding, trimming and the limits of the module docstring."""
    head: tuple[str, ...] | None = tuple(column_headers(header)) if header is not None else None
    if head is not None:
        _check_width(where, len(head))
    out: list[tuple[str, ...]] = []
    padded = 0
    for label, raw in rows:
        cells = [_cell(where, label, j, v, head) for j, v in enumerate(raw)]
        if head is None:
            if not any(cells):
                continue
            _check_width(where, len(cells))
            head = column_headers(cells)
            continue
        if not any(cells):
            continue
        width = len(head)
        if len(cells) > width:
            extra = cells[width:]
            if any(extra):
                k = next(i for i, c in enumerate(extra) if c)
                raise InputError(f"{where}: {label} has {len(cells)} cells but the header has {width} columns "
                                 f"(extra cell {extra[k][:40]!r} in column {width + 1 + k})")
            cells = cells[:width]
        elif len(cells) < width:
            cells += [""] * (width - len(cells))
            padded += 1
        out.append(tuple(cells))
        if len(out) > MAX_ROWS:
            raise InputError(f"{where}: more than {MAX_ROWS:,} rows (the table store's limit)")
    if head is None:
        raise InputError(f"{where}: no header row (the table is empty)")
    return Table(table_id, head, tuple(out), title, source, dict(metadata or {}), padded)


def _check_width(where: str, n: int) -> None:
    if n > MAX_COLUMNS:
        raise InputError(f"{where}: {n} columns (at most {MAX_COLUMNS})")


def _cell(where: str, label: str, j: int, value: object, head: tuple[str, ...] | None) -> str:
    text = cell_text(value)
    if len(text) > MAX_CELL_CHARS:
        col = f"column {j + 1}" + (f" ({head[j]!r})" if head is not None and j < len(head) else "")
        raise InputError(f"{where}: {label}, {col}: a cell of {len(text):,} characters (at most {MAX_CELL_CHARS:,})")
    if "\x00" in text:
        col = f"column {j + 1}" + (f" ({head[j]!r})" if head is not None and j < len(head) else "")
        raise InputError(f"{where}: {label}, {col}: the cell contains a NUL character")
    return text


def decode_utf8(path: Path, data: bytes) -> str:
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise InputError(f"{path}: not UTF-8 text: invalid byte 0x{data[exc.start]:02x} at byte offset {exc.start} "
                         f"(line {line}); convert the file to UTF-8") from None


# --------------------------------------------------------------------------------------- CSV / TSV
def looks_like_wtq(text: str) -> bool:
    """WikiTableQuestions' CSV escaping: a quote or backslash escaped with a backslash."""
    return '\\"' in text or "\\\\" in text


def sniff_delimiter(sample: str, default: str = ",") -> str:
    """csv.Sniffer's delimiter (one of CSV_DELIMITERS) when it occurs in the header line, else the
    candidate the header line has most of, else `default`."""
    first = next((line for line in sample.splitlines() if line.strip()), "")
    try:
        found = csv.Sniffer().sniff(sample, delimiters=CSV_DELIMITERS).delimiter
        if found in first:
            return found
    except csv.Error:
        pass
    counts = {d: first.count(d) for d in CSV_DELIMITERS}
    best = max(counts, key=lambda d: (counts[d], d == default))
    return best if counts[best] else default


def read_csv(path: Path, table_id: str | None = None, delimiter: str | None = None, wtq: bool | None = None,
             title: str | None = None, source: str | None = None) -> Table:
    """One CSV (or TSV: `delimiter="\\t"`) file as a Table; `delimiter` None: sniffed; `wtq` None: detected."""
    text = decode_utf8(path, _read_bytes(path))
    if delimiter is None:
        delimiter = "\t" if path.suffix.lower() == ".tsv" else sniff_delimiter(text[:SNIFF_BYTES])
    if wtq is None:
        wtq = looks_like_wtq(text)
    fmt = {"escapechar": "\\", "doublequote": False} if wtq else {}
    tid = table_id or path.name
    lines = _RowLines(io.StringIO(text, newline=""))
    reader = csv.reader(lines, delimiter=delimiter, strict=False, **fmt)  # type: ignore[arg-type]
    strict = {"delimiter": delimiter, "strict": True, **fmt}
    return build_table(str(path), tid, _csv_rows(path, reader, lines, strict),
                       title if title is not None else title_of(path), source if source is not None else tid)


class _RowLines:
    """The lines of a CSV text for csv.reader, keeping the raw lines of the row being read (so an
    unterminated quote in the last row can be found)."""

    def __init__(self, lines: Iterator[str]) -> None:
        self.lines = lines
        self.current: list[str] = []
        self.fresh = True  # the next line starts a new row

    def __iter__(self) -> _RowLines:
        return self

    def __next__(self) -> str:
        line = next(self.lines)
        if self.fresh:
            self.current = []
            self.fresh = False
        self.current.append(line)
        return line


def _csv_rows(path: Path, reader: Any, lines: _RowLines, strict: dict[str, Any]) -> Iterator[tuple[str, list[str]]]:
    line = 0
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise InputError(f"{path}: line {getattr(reader, 'line_num', line + 1)}: malformed CSV ({exc})") from None
        line = reader.line_num
        if lines.current and (len(lines.current) > 1 or not lines.current[-1].endswith(("\n", "\r"))
                              or (row and row[-1].endswith(("\n", "\r")))):
            _check_closed(path, lines.current, row, line, strict)  # a row over several lines, or the last one
        lines.fresh = True
        yield f"line {line}", row


def _check_closed(path: Path, raw: list[str], row: list[str], end_line: int, strict: dict[str, Any]) -> None:
    """InputError when the row read from `raw` ends inside a quoted field (a quote never closed: the lenient
    reader would take the rest of the file as one cell)."""
    try:
        list(csv.reader(raw, **strict))
    except csv.Error as exc:
        if "unexpected end of data" not in str(exc):
            return  # other irregularities are read leniently, as before
        last = row[-1] if row else ""
        opened = end_line - last.count("\n") + (1 if last.endswith("\n") else 0)
        raise InputError(f"{path}: line {opened}: a quote (\") opens a cell that is never closed (the rest of the "
                         f"file would be read as one cell); close the quote or double it (\"\") if it is part of "
                         f"the text") from None


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror or exc})") from None


# ------------------------------------------------------------------------------------------- Excel
def read_xlsx(path: Path, file_id: str | None = None) -> list[Table]:
    """Every non-empty sheet of an .xlsx workbook, id `<file id>#<sheet>`."""
    import zipfile

    from openpyxl import load_workbook
    from openpyxl.utils.exceptions import InvalidFileException

    fid = file_id or path.name
    try:
        wb = load_workbook(path, read_only=True, data_only=True)
    except (InvalidFileException, zipfile.BadZipFile, KeyError, OSError, ValueError) as exc:
        raise InputError(f"{path}: not a readable .xlsx workbook ({type(exc).__name__}: {exc})") from None
    tables = []
    try:
        for ws in wb.worksheets:
            where = f"{path}#{ws.title}"

            def rows(ws: object = ws) -> Iterator[tuple[str, list[object]]]:
                for i, row in enumerate(ws.iter_rows(values_only=True), start=1):  # type: ignore[attr-defined]
                    cells = list(row)
                    while cells and (cells[-1] is None or cells[-1] == ""):
                        cells.pop()
                    yield f"row {i}", cells

            try:
                table = build_table(where, f"{fid}#{ws.title}", rows(), f"{title_of(path)} {ws.title}".strip(),
                                    f"{fid}#{ws.title}", {"sheet": ws.title})
            except InputError as exc:
                if "no header row" in str(exc):
                    continue  # an empty sheet
                raise
            tables.append(table)
    finally:
        wb.close()
    return tables


# ------------------------------------------------------------------------------------------ SQLite
def _quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def read_sqlite(path: Path, file_id: str | None = None) -> list[Table]:
    """Every user table of an SQLite database, id `<file id>#<table>`, opened read-only."""
    fid = file_id or path.name
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    try:
        conn = sqlite3.connect(f"file:{quote(str(path.resolve()))}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise InputError(f"{path}: cannot open as an SQLite database ({exc})") from None
    tables = []
    try:
        try:
            names = [r[0] for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")]
        except sqlite3.DatabaseError as exc:
            raise InputError(f"{path}: not an SQLite database ({exc})") from None
        for name in names:
            where = f"{path}#{name}"
            cols = [r[1] for r in conn.execute(f"PRAGMA table_info({_quote_ident(name)})")]
            if not cols:
                continue
            try:
                cur = conn.execute(f"SELECT * FROM {_quote_ident(name)}")
            except sqlite3.Error as exc:
                raise InputError(f"{where}: cannot read the table ({exc})") from None

            def rows(cur: sqlite3.Cursor = cur, where: str = where, cols: list[str] = cols
                     ) -> Iterator[tuple[str, list[object]]]:
                for i, row in enumerate(cur, start=1):
                    for j, v in enumerate(row):
                        if isinstance(v, bytes):
                            raise InputError(f"{where}: row {i}, column {cols[j]!r}: a BLOB value (only text and "
                                             f"numbers can be stored)")
                    yield f"row {i}", list(row)

            tables.append(build_table(where, f"{fid}#{name}", rows(), name.replace("_", " "), f"{fid}#{name}",
                                      {"sqlite_table": name}, header=cols))
    finally:
        conn.close()
    return tables


# ------------------------------------------------------------------------------------------- JSONL
def read_jsonl_tables(path: Path) -> list[Table]:
    """The table records of a JSONL file (lines with a "table" object); other lines are ignored."""
    tables = []
    seen: dict[str, int] = {}
    for n, rec in iter_jsonl(path):  # the passage reader's: the same errors for a bad line, a bad byte, gzip
        if not isinstance(rec, dict) or "table" not in rec:
            continue
        t = rec["table"]
        where = f"{path}:{n}"
        if not isinstance(t, dict):
            raise InputError(f"{where}: \"table\" must be an object")
        tid = t.get("id")
        if not isinstance(tid, str) or not tid.strip():
            raise InputError(f"{where}: the table needs a non-empty string \"id\"")
        if tid in seen:
            raise InputError(f"{where}: table id {tid!r} was already used on line {seen[tid]}")
        seen[tid] = n
        columns: Any = t.get("columns")
        if not isinstance(columns, list) or not columns or not all(isinstance(c, (str, int, float)) for c in columns):
            raise InputError(f"{where}: table {tid!r}: \"columns\" must be a non-empty list of names")
        rows = t.get("rows", [])
        if not isinstance(rows, list):
            raise InputError(f"{where}: table {tid!r}: \"rows\" must be a list of lists")
        title = t.get("title", "")
        if not isinstance(title, str):
            raise InputError(f"{where}: table {tid!r}: \"title\" must be a string")
        meta = t.get("metadata", {})
        if not isinstance(meta, dict):
            raise InputError(f"{where}: table {tid!r}: \"metadata\" must be an object")

        def cells(rows: list[object] = rows, where: str = where, tid: str = str(tid),
                  columns: Sequence[object] = tuple(columns)) -> Iterator[tuple[str, list[object]]]:
            for i, row in enumerate(rows, start=1):
                if not isinstance(row, list):
                    raise InputError(f"{where}: table {tid!r}: row {i} is not a list")
                for j, v in enumerate(row):
                    if v is not None and not isinstance(v, (str, int, float, bool)):
                        col = repr(str(columns[j])) if j < len(columns) else str(j + 1)
                        raise InputError(f"{where}: table {tid!r}: row {i}, column {col}: a "
                                         f"{type(v).__name__} (cells are text, numbers or null)")
                yield f"row {i}", row

        tables.append(build_table(f"{where}: table {tid!r}", tid, cells(), title, str(path.name),
                                  {str(k): cell_text(v) for k, v in meta.items()},
                                  header=[cell_text(c) for c in columns]))
    return tables


# -------------------------------------------------------------------------------------------- any
def read_table_file(path: str | Path, root: str | Path | None = None, root_name: str | None = None,
                    wtq: bool | None = None) -> list[Table]:
    """The tables of one file (a suffix of TABLE_SUFFIXES), ids relative to the input folder `root`."""
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix not in TABLE_SUFFIXES:
        raise InputError(f"{p}: not a table file (expected one of {', '.join(TABLE_SUFFIXES)})")
    if not p.is_file():
        raise InputError(f"{p}: no such file")
    fid = table_file_id(p, Path(root) if root is not None else None, root_name)
    if suffix in (".csv", ".tsv"):
        return [read_csv(p, fid, "\t" if suffix == ".tsv" else None, wtq)]
    if suffix == ".xlsx":
        return read_xlsx(p, fid)
    return read_sqlite(p, fid)


def table_files(root: Path) -> list[Path]:
    """The table files under `root` (recursively, sorted; hidden files and folders skipped)."""
    if root.is_file():
        return [root] if root.suffix.lower() in TABLE_SUFFIXES else []
    return sorted(p for p in root.rglob("*") if p.is_file() and p.suffix.lower() in TABLE_SUFFIXES
                  and not any(part.startswith(".") for part in p.relative_to(root).parts))
