"""Tables as a source: the in-memory table, its column profile and how it is laid out in SQL.

Every stage that touches a table (ingest, the table store of either backend, the semantic parser,
its training and evaluation) uses this one layout, so a program the parser writes runs unchanged
on an in-memory SQLite table, on the embedded store's tables and on PostgreSQL:

    CREATE TABLE <sql_name> (row_id INTEGER PRIMARY KEY,   -- 0-based source row order
                             c0 TEXT, c0_num REAL,          -- the cell as text; its first number
                             c1 TEXT, c1_num REAL, ...)

`cN` holds the stripped cell text ('' for an empty cell, never NULL), `cN_num` the first number
in the cell (thousands separators removed; NULL when there is none). A column's profile says
whether it is a number, date or text column; the `_num` copy exists for every column because
cells such as "12 (3)" or "2–1" are text columns whose numbers a question still compares.
"""

from __future__ import annotations

import re
import sqlite3
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

ColumnType = Literal["number", "date", "text"]
COLUMN_TYPES: tuple[ColumnType, ...] = ("number", "date", "text")
PROFILE_VALUES = 50  # distinct values kept per column profile, most frequent first
TYPE_SHARE = 0.8  # share of non-empty cells that must parse for a column to be number / date

_NUMBER = re.compile(r"[-+−]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|[-+−]?\.\d+")
_WHOLE_NUMBER = re.compile(r"^\s*[-+−]?[$€£¥]?\s*(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?\s*(?:%|[a-zA-Z]{0,3})?\s*$")
_DATE = re.compile(
    r"^\s*(?:\d{4}-\d{2}(?:-\d{2})?|\d{1,2}\s+[A-Z][a-z]+\.?\s+\d{4}|[A-Z][a-z]+\.?\s+\d{1,2},?\s+\d{4}"
    r"|[A-Z][a-z]+\.?\s+\d{4}|\d{1,2}/\d{1,2}/\d{2,4})\s*$")
_UNIT_IN_HEADER = re.compile(r"[(\[]\s*([^()\[\]]{1,12}?)\s*[)\]]\s*$")
_UNIT_SUFFIX = re.compile(r"^\s*[-+−]?[$€£¥]?\s*[\d.,]+\s*(%|[a-zA-Z]{1,3})\s*$")
_UNIT_PREFIX = re.compile(r"^\s*([$€£¥])")


def parse_number(cell: str) -> float | None:
    """The first number in `cell` ("1,234" → 1234.0, "12 (3)" → 12.0, "−5" → -5.0), or None."""
    m = _NUMBER.search(cell)
    if m is None:
        return None
    text = m.group(0).replace(",", "").replace("−", "-")
    try:
        return float(text)
    except ValueError:
        return None


def is_number_cell(cell: str) -> bool:
    """The cell is a number as a whole (optionally with a currency sign, % or a short unit)."""
    return bool(_WHOLE_NUMBER.match(cell))


def is_date_cell(cell: str) -> bool:
    return bool(_DATE.match(cell))


@dataclass(frozen=True, slots=True)
class ColumnProfile:
    """What the router, the table retriever and the parser know of a column without reading it."""

    name: str  # as in the source header
    sql_name: str  # cN
    type: ColumnType
    n_distinct: int
    n_empty: int
    values: tuple[str, ...]  # distinct values, most frequent first (at most PROFILE_VALUES)
    unit: str = ""  # "km", "%", "$", … from the header "(km)" or the cells' common suffix/prefix
    minimum: float | None = None  # number columns
    maximum: float | None = None

    @property
    def num_name(self) -> str:
        return f"{self.sql_name}_num"

    @property
    def categorical(self) -> bool:
        return self.type == "text" and 0 < self.n_distinct <= PROFILE_VALUES

    def to_dict(self) -> dict[str, object]:
        return {"name": self.name, "sql_name": self.sql_name, "type": self.type, "n_distinct": self.n_distinct,
                "n_empty": self.n_empty, "values": list(self.values), "unit": self.unit,
                "minimum": self.minimum, "maximum": self.maximum}

    @classmethod
    def from_dict(cls, d: dict[str, object]) -> ColumnProfile:
        t = str(d["type"])
        if t not in COLUMN_TYPES:
            raise ValueError(f"unknown column type {t!r}")
        lo, hi = d.get("minimum"), d.get("maximum")
        return cls(str(d["name"]), str(d["sql_name"]), t,
                   int(d["n_distinct"]), int(d["n_empty"]),  # type: ignore[call-overload]
                   tuple(str(v) for v in d.get("values", ())),  # type: ignore[attr-defined]
                   str(d.get("unit", "")),
                   float(lo) if lo is not None else None, float(hi) if hi is not None else None)  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class TableProfile:
    table_id: str  # namespaced like passage ids: "<root>/<file>[#sheet]" or the JSONL table id
    sql_name: str  # the SQL table's name in a store (t_<hash>); "t" for a table alone in memory
    title: str
    source: str
    n_rows: int
    columns: tuple[ColumnProfile, ...]
    metadata: dict[str, str] = field(default_factory=dict)

    def column(self, name: str) -> ColumnProfile:
        for c in self.columns:
            if c.name == name or c.sql_name == name:
                return c
        raise KeyError(name)

    def description(self) -> str:
        """The text embedded and BM25-indexed for table retrieval: title, columns with types and units,
        and the categorical values."""
        parts = [self.title] if self.title else []
        cols = []
        for c in self.columns:
            unit = f" ({c.unit})" if c.unit else ""
            cols.append(f"{c.name}{unit} [{c.type}]")
        parts.append("Columns: " + "; ".join(cols) + ".")
        for c in self.columns:
            if c.type == "text" and c.values:
                parts.append(f"{c.name}: " + ", ".join(c.values[:20]) + ".")
        return " ".join(parts)

    def to_dict(self) -> dict[str, object]:
        return {"table_id": self.table_id, "sql_name": self.sql_name, "title": self.title, "source": self.source,
                "n_rows": self.n_rows, "columns": [c.to_dict() for c in self.columns],
                "metadata": dict(self.metadata)}

    @classmethod
    def from_dict(cls, d: dict[str, object]) -> TableProfile:
        return cls(str(d["table_id"]), str(d["sql_name"]), str(d.get("title", "")), str(d.get("source", "")),
                   int(d["n_rows"]),  # type: ignore[call-overload]
                   tuple(ColumnProfile.from_dict(c) for c in d["columns"]),  # type: ignore[attr-defined]
                   {str(k): str(v) for k, v in dict(d.get("metadata", {})).items()})  # type: ignore[call-overload]


@dataclass(frozen=True, slots=True)
class Table:
    """A table as read from a file: the header and the rows as stripped strings ('' for empty)."""

    table_id: str
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    title: str = ""
    source: str = ""
    metadata: dict[str, str] = field(default_factory=dict)
    padded_rows: int = field(default=0, compare=False)  # rows read with fewer cells than the header, padded with ''

    def __post_init__(self) -> None:
        width = len(self.header)
        if width == 0:
            raise ValueError(f"table {self.table_id!r} has no columns")
        for i, row in enumerate(self.rows):
            if len(row) != width:
                raise ValueError(f"table {self.table_id!r}: row {i + 1} has {len(row)} cells, the header {width}")

    def column(self, j: int) -> list[str]:
        return [r[j] for r in self.rows]


def column_headers(header: Sequence[str]) -> tuple[str, ...]:
    """Header names made unique and non-empty ("", "x", "x" → "column 1", "x", "x 2")."""
    seen: Counter[str] = Counter()
    out = []
    for j, raw in enumerate(header):
        name = " ".join(str(raw).split()) or f"column {j + 1}"
        seen[name] += 1
        out.append(name if seen[name] == 1 else f"{name} {seen[name]}")
    return tuple(out)


def _unit(name: str, cells: list[str], kind: ColumnType) -> str:
    m = _UNIT_IN_HEADER.search(name)
    if m:
        return m.group(1)
    if kind != "number":
        return ""
    units: Counter[str] = Counter()
    for cell in cells:
        s = _UNIT_SUFFIX.match(cell) or _UNIT_PREFIX.match(cell)
        if s:
            units[s.group(1)] += 1
    if units:
        unit, n = units.most_common(1)[0]
        if n >= TYPE_SHARE * len(cells):
            return unit
    return ""


def profile_column(name: str, j: int, cells: Sequence[str]) -> ColumnProfile:
    filled = [c for c in cells if c]
    kind: ColumnType = "text"
    if filled and sum(is_number_cell(c) for c in filled) >= TYPE_SHARE * len(filled):
        kind = "number"
    elif filled and sum(is_date_cell(c) for c in filled) >= TYPE_SHARE * len(filled):
        kind = "date"
    counts = Counter(filled)
    values = tuple(v for v, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:PROFILE_VALUES])
    lo = hi = None
    if kind == "number":
        nums = [x for x in (parse_number(c) for c in filled) if x is not None]
        if nums:
            lo, hi = min(nums), max(nums)
    return ColumnProfile(name, f"c{j}", kind, len(counts), len(cells) - len(filled), values,
                         _unit(name, filled, kind), lo, hi)


def profile_table(table: Table, sql_name: str = "t") -> TableProfile:
    cols = tuple(profile_column(name, j, table.column(j)) for j, name in enumerate(table.header))
    return TableProfile(table.table_id, sql_name, table.title, table.source, len(table.rows), cols,
                        dict(table.metadata))


def create_statement(profile: TableProfile) -> str:
    cols = ", ".join(f"{c.sql_name} TEXT NOT NULL, {c.num_name} REAL" for c in profile.columns)
    return f"CREATE TABLE {profile.sql_name} (row_id INTEGER PRIMARY KEY, {cols})"


def row_values(table: Table) -> Iterable[tuple[object, ...]]:
    for i, row in enumerate(table.rows):
        out: list[object] = [i]
        for cell in row:
            out.extend((cell, parse_number(cell)))
        yield tuple(out)


def insert_statement(profile: TableProfile, placeholder: str = "?") -> str:
    n = 1 + 2 * len(profile.columns)
    return f"INSERT INTO {profile.sql_name} VALUES ({', '.join([placeholder] * n)})"


def load_sqlite(conn: sqlite3.Connection, table: Table, sql_name: str = "t") -> TableProfile:
    """Create `table` in `conn` under `sql_name` in the layout above; its profile."""
    profile = profile_table(table, sql_name)
    conn.execute(create_statement(profile))
    conn.executemany(insert_statement(profile), row_values(table))
    return profile


def memory_table(table: Table) -> tuple[sqlite3.Connection, TableProfile]:
    """`table` alone in an in-memory SQLite database as `t` (training, evaluation, tests)."""
    conn = sqlite3.connect(":memory:")
    return conn, load_sqlite(conn, table)
