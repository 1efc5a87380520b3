"""Tables among the inputs of an index job: CSV / TSV / Excel / SQLite files and the `table` records of
JSONL files, read (and so validated) before anything is written, then stored in one transaction."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from amsrag.ingest.api import InputRoot
from amsrag.ingest.document_tables import TABLE_MARK
from amsrag.ingest.tables import TABLE_SUFFIXES, read_jsonl_tables, read_table_file, table_files
from amsrag.tables.table import Table


@dataclass(frozen=True, slots=True)
class TableInputs:
    tables: list[Table]
    files: list[Path]  # the table files read (JSONL files only when they held tables)
    roots: list[InputRoot]  # inputs holding passages too (a table file given alone is not one)


def is_table_file(path: Path) -> bool:
    return path.suffix.lower() in TABLE_SUFFIXES


def _jsonl_files(root: Path) -> list[Path]:
    if root.is_file():
        return [root] if root.name.endswith(".jsonl") else []
    return sorted(p for p in root.rglob("*.jsonl") if p.is_file()
                  and not any(part.startswith(".") for part in p.relative_to(root).parts))


def _may_hold_tables(path: Path, chunk: int = 1 << 20) -> bool:
    """Whether a JSONL file contains the key "table" at all (most hold only passages: not parsed twice)."""
    tail = b""
    with path.open("rb") as fh:
        while block := fh.read(chunk):
            if b'"table"' in tail + block:
                return True
            tail = block[-8:]
    return False


def read_table_inputs(roots: Sequence[InputRoot]) -> TableInputs:
    """Every table of the inputs; an InputError names the file, row and column of the first bad one."""
    tables: list[Table] = []
    files: list[Path] = []
    passage_roots: list[InputRoot] = []
    for root in roots:
        base = root.path if root.path.is_dir() else None
        for path in table_files(root.path):
            tables += read_table_file(path, base, root.name)
            files.append(path)
        for path in _jsonl_files(root.path):
            if not _may_hold_tables(path):
                continue
            found = read_jsonl_tables(path)
            if found:
                tables += found
                files.append(path)
        if root.path.is_dir() or not is_table_file(root.path):
            passage_roots.append(root)
    return TableInputs(tables, files, passage_roots)


def document_table_ids(table_ids: Iterable[str], keys: Iterable[str]) -> set[str]:
    """The ids among `table_ids` of tables read from the document files `keys` (`<key>#table-N`)."""
    wanted = set(keys)
    out = set()
    for tid in table_ids:
        key, mark, n = tid.rpartition(TABLE_MARK)
        if mark and n.isdigit() and key in wanted:
            out.add(tid)
    return out
