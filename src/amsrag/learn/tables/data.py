"""WikiTableQuestions for the semantic parser: questions, their tables, and the split by table.

`is_test_table(path)` is the one test-split rule (20 % of the tables, by a hash of the table's path, never
trained on); `split_of(path)` adds the calibration slice of the training tables (held out from the ranker's
fit, used to tune it and to fit its confidence). Tables are read straight from `tables.tar.gz`.
"""

from __future__ import annotations

import csv
import hashlib
import io
import sqlite3
import tarfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from amsrag.errors import InputError
from amsrag.structured.denotation import split_target
from amsrag.tables.base import DEFAULT_ROW_LIMIT, QueryRows
from amsrag.tables.table import Table, column_headers

WTQ_DIR = "wikitablequestions"
QUESTIONS_FILE = "training.tsv"
TABLES_FILE = "tables.tar.gz"
SPLIT_SALT = "amsrag-wtq-split-v1"
TEST_SHARE = 0.2
CALIBRATION_SHARE = 0.15  # of all tables, taken from the training tables
SPLIT_RULE = (f"u = int(sha256('{SPLIT_SALT}' + '\\x1f' + table path)[:8], 16) / 2**32; test: u < {TEST_SHARE}; "
              f"calibration: {TEST_SHARE} <= u < {TEST_SHARE + CALIBRATION_SHARE}; train: the rest")

Split = Literal["train", "calibration", "test"]


def table_bucket(path: str) -> float:
    """A uniform number in [0, 1) fixed by the table's path (e.g. 'csv/204-csv/590.csv')."""
    digest = hashlib.sha256(f"{SPLIT_SALT}\x1f{path}".encode()).hexdigest()
    return int(digest[:8], 16) / 2**32


def is_test_table(path: str) -> bool:
    """The held-out test split: 20 % of WTQ's tables by path hash; no model may train or tune on them."""
    return table_bucket(path) < TEST_SHARE


def split_of(path: str) -> Split:
    u = table_bucket(path)
    if u < TEST_SHARE:
        return "test"
    if u < TEST_SHARE + CALIBRATION_SHARE:
        return "calibration"
    return "train"


@dataclass(frozen=True, slots=True)
class Question:
    id: str
    utterance: str
    table: str  # the table's path in the archive
    targets: tuple[str, ...]


def load_questions(data_dir: Path) -> list[Question]:
    path = data_dir / WTQ_DIR / QUESTIONS_FILE
    if not path.is_file():
        raise InputError(f"{path}: WikiTableQuestions training.tsv not found (--data names ../shared/data)")
    out = []
    with path.open(encoding="utf-8") as f:
        header = f.readline().rstrip("\n").split("\t")
        if header[:4] != ["id", "utterance", "context", "targetValue"]:
            raise InputError(f"{path}: unexpected header {header}")
        for line in f:
            qid, utterance, context, target = line.rstrip("\n").split("\t")[:4]
            out.append(Question(qid, utterance, context, tuple(split_target(target))))
    return out


def parse_table(path: str, text: str) -> Table:
    rows = list(csv.reader(io.StringIO(text), escapechar="\\", doublequote=False))
    if not rows:
        raise InputError(f"{path}: empty table")
    header = column_headers(rows[0])
    width = len(header)
    body = tuple(tuple((list(r) + [""] * width)[:width]) for r in rows[1:])
    return Table(path, header, tuple(tuple(c.strip() for c in r) for r in body), source=path)


def load_tables(data_dir: Path, paths: Sequence[str] | None = None) -> dict[str, Table]:
    """The tables of `paths` (all when None) from tables.tar.gz, by path."""
    archive = data_dir / WTQ_DIR / TABLES_FILE
    if not archive.is_file():
        raise InputError(f"{archive}: WikiTableQuestions tables.tar.gz not found")
    wanted = set(paths) if paths is not None else None
    tables: dict[str, Table] = {}
    with tarfile.open(archive, "r:gz") as tar:
        for member in tar:
            name = member.name.removeprefix("./")
            if not member.isfile() or not name.endswith(".csv") or (wanted is not None and name not in wanted):
                continue
            f = tar.extractfile(member)
            if f is not None:
                tables[name] = parse_table(name, f.read().decode("utf-8"))
    return tables


class SqliteRunner:
    """A `SqlRunner` over one SQLite connection (training, the benchmark, tests): runs a statement as given,
    keeping at most `row_limit` rows. The guard of the serving path is not this class's job."""

    def __init__(self, conn: sqlite3.Connection, row_limit: int = DEFAULT_ROW_LIMIT) -> None:
        self.conn = conn
        self.row_limit = row_limit

    def run(self, sql: str, params: Sequence[object] = ()) -> QueryRows:
        cur = self.conn.execute(sql, tuple(params))
        rows = cur.fetchmany(self.row_limit + 1)
        columns = tuple(d[0] for d in cur.description or ())
        return QueryRows(columns, tuple(tuple(r) for r in rows[: self.row_limit]), len(rows) > self.row_limit)
