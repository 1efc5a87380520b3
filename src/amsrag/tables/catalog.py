"""What both table stores share: SQL names, content fingerprints, write checks and reports, and
the text a table is found by.

A stored table's SQL name is `t_` + the first 12 hex digits of sha256(table_id); its fingerprint
is sha256 over its header, rows, title, source and metadata (not its id), so adding the same table
again is a no-op and adding other content under a stored id is a conflict.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from amsrag.errors import InputError
from amsrag.tables.table import Table

MAX_COLUMNS = 200
MAX_CELL_CHARS = 10_000
SEARCH_VALUES = 2_000  # distinct cell values per table in its search text, most frequent first
SEARCH_VALUE_CHARS = 200  # longer cells are cut for the search text


@dataclass(frozen=True, slots=True)
class TableWriteReport:
    added: int = 0  # tables written that were not stored before
    replaced: int = 0  # stored tables written again with new content (replace=True)
    skipped: int = 0  # tables stored already with the same content
    rows: int = 0  # rows written
    table_ids: tuple[str, ...] = ()  # the tables written (added or replaced), in input order


@dataclass(frozen=True, slots=True)
class TableDeleteReport:
    deleted: int
    table_ids: tuple[str, ...]


def sql_name_for(table_id: str) -> str:
    return "t_" + hashlib.sha256(table_id.encode("utf-8")).hexdigest()[:12]


def content_sha256(table: Table) -> str:
    payload = json.dumps([list(table.header), [list(r) for r in table.rows], table.title, table.source,
                          sorted(table.metadata.items())], ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def doc_id_of(table: Table) -> str:
    """The document a table came from: its id before `#sheet`, or its `doc_id` metadata."""
    return table.metadata.get("doc_id") or table.table_id.split("#", 1)[0]


def validate_tables(tables: Sequence[Table]) -> None:
    """InputError for a batch no store may write: duplicate or empty ids, too many columns, NUL
    characters or cells over MAX_CELL_CHARS (naming the table, row and column)."""
    counts = Counter(t.table_id for t in tables)
    dup = sorted(i for i, n in counts.items() if n > 1)
    if dup:
        raise InputError(f"duplicate table id {dup[0]!r} in one write ({len(dup)} duplicated)")
    for t in tables:
        if not isinstance(t, Table):
            raise InputError(f"expected Table objects, got {type(t).__name__}")
        if not t.table_id.strip():
            raise InputError("a table has an empty id")
        if len(t.header) > MAX_COLUMNS:
            raise InputError(f"table {t.table_id!r} has {len(t.header)} columns (at most {MAX_COLUMNS})")
        for j, name in enumerate(t.header):
            if "\x00" in name:
                raise InputError(f"table {t.table_id!r}: column {j + 1} name contains a NUL character")
        for i, row in enumerate(t.rows):
            for j, cell in enumerate(row):
                if len(cell) > MAX_CELL_CHARS:
                    raise InputError(f"table {t.table_id!r}: row {i + 1}, column {j + 1} "
                                     f"({t.header[j]!r}) has {len(cell):,} characters (at most {MAX_CELL_CHARS:,})")
                if "\x00" in cell:
                    raise InputError(f"table {t.table_id!r}: row {i + 1}, column {j + 1} ({t.header[j]!r}) "
                                     f"contains a NUL character")


def search_values(table: Table, cap: int = SEARCH_VALUES) -> list[str]:
    """Up to `cap` distinct non-empty cells, the most frequent first (ties: first seen)."""
    counts: Counter[str] = Counter()
    for row in table.rows:
        counts.update(c[:SEARCH_VALUE_CHARS] for c in row if c)
    return [v for v, _ in counts.most_common(cap)]


def plan_writes(tables: Sequence[Table], hashes: Sequence[str], stored: Mapping[str, tuple[str, str]],
                replace: bool) -> tuple[list[tuple[Table, str, bool]], int]:
    """What an add writes: (table, content hash, already stored) for every table whose content changed or is
    new, and how many are skipped as stored with the same content; a changed table without `replace` is an
    InputError. `stored`: table id -> (sql name, content hash) of the tables already there."""
    plan: list[tuple[Table, str, bool]] = []
    skipped = 0
    for t, h in zip(tables, hashes, strict=True):
        old = stored.get(t.table_id)
        if old is not None and old[1] == h:
            skipped += 1
            continue
        if old is not None and not replace:
            raise InputError(f"table {t.table_id!r} is already in the store with different content "
                             f"(add it with replace=True to overwrite it)")
        plan.append((t, h, old is not None))
    return plan, skipped
