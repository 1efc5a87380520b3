"""The embedded table store: every table of an index in one SQLite file (`<index dir>/tables.sqlite`).

    tables_catalog(table_id PRIMARY KEY, sql_name UNIQUE, doc_id, content_sha256, profile_json,
                   search_values)  -- search_values: the cells the table is found by (JSON list)
    tables_meta(key PRIMARY KEY, value)  -- schema_version, generation (bumped by every write)
    t_<12 hex of sha256(table_id)>      -- one per table, in the layout of `tables.table`

Value lookups are indexed as `lower(cN) = lower(?)` / `lower(cN) IN (lower(?), ...)`: every column
that is not a number column, in a table of at least `INDEX_MIN_ROWS` rows, has an index on
`lower(cN)` (the same expression index the PostgreSQL store has, so one program runs fast on both).
`cN = ? COLLATE NOCASE` gives the same rows (ASCII case folding, like SQLite's lower()) but is not
indexed. Writes are one `BEGIN IMMEDIATE` transaction each (all or
nothing). Statements from outside run through `runner()`: the guard (`tables.guard`) first,
then a separate read-only connection (`mode=ro`, `PRAGMA query_only`, an authorizer that allows
reading the store's user tables and calling the allowed functions only, no ATTACH, a 10 MB value
limit) interrupted after its time budget.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import quote

from amsrag.errors import AmsragError, IndexCorruptError, IndexNotFoundError, StorageError
from amsrag.sqlite_wal import use_wal
from amsrag.store.table_search import CatalogSearch, TableSearch
from amsrag.store.table_writes import TableLifecycle
from amsrag.tables.base import (
    ALLOWED_FUNCTIONS,
    DEFAULT_ROW_LIMIT,
    DEFAULT_TIMEOUT_S,
    QueryRows,
    SqlRunner,
    SqlTimeout,
    TableHit,
)
from amsrag.tables.catalog import (
    TableDeleteReport,
    TableWriteReport,
    doc_id_of,
    search_values,
)
from amsrag.tables.table import (
    Table,
    TableProfile,
    create_statement,
    insert_statement,
    row_values,
)

SCHEMA_VERSION = 1
FILE_NAME = "tables.sqlite"
CATALOG = "tables_catalog"
META = "tables_meta"
PROGRESS_STEPS = 1000  # SQLite VM instructions between checks of a statement's deadline
MAX_VALUE_BYTES = 10_000_000  # the longest string or blob a statement may build
INSERT_BATCH = 5000
INDEX_MIN_ROWS = 500  # tables this long get the lower(cN) lookup indexes

_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS {CATALOG} (
    table_id TEXT PRIMARY KEY,
    sql_name TEXT NOT NULL UNIQUE,
    doc_id TEXT NOT NULL,
    content_sha256 TEXT NOT NULL,
    profile_json TEXT NOT NULL,
    search_values TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS {CATALOG}_doc_id ON {CATALOG} (doc_id);
CREATE TABLE IF NOT EXISTS {META} (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""

# what the runner's authorizer lets a statement call (SQLite's names: LIKE and GLOB are functions)
_SQLITE_FUNCTIONS = frozenset({f.lower() for f in ALLOWED_FUNCTIONS} | {"substring", "like", "glob"})


def index_statements(profile: TableProfile) -> list[str]:
    """The value-lookup indexes: `lower(cN)` of every column that is not a number column, in tables of
    at least INDEX_MIN_ROWS rows (a smaller one is scanned faster than an index is created)."""
    if profile.n_rows < INDEX_MIN_ROWS:
        return []
    return [f"CREATE INDEX {profile.sql_name}_{c.sql_name}_lower ON {profile.sql_name} (lower({c.sql_name}))"
            for c in profile.columns if c.type != "number"]


class TableStoreClosedError(AmsragError):
    """The table store was closed."""


class TableStore:
    """Tables in one SQLite file. Use `TableStore.open(path, create=...)`; close it (or use `with`)."""

    backend = "embedded"

    def __init__(self, path: Path, conn: sqlite3.Connection) -> None:
        self.path = path
        self._conn: sqlite3.Connection | None = conn
        self._lock = threading.RLock()
        self._search = CatalogSearch()
        self._runners: weakref.WeakSet[SqliteTableRunner] = weakref.WeakSet()
        self._writes = TableLifecycle(self._transaction, SqliteTableStatements())

    # ---------------------------------------------------------------- opening
    @classmethod
    def open(cls, path: str | Path, create: bool = False) -> TableStore:
        """The store in the file `path` (a directory: its `tables.sqlite`); `create`: make it when absent."""
        p = Path(path)
        if p.is_dir():
            p = p / FILE_NAME
        if not p.exists():
            if not create:
                raise IndexNotFoundError(f"no table store at {p}")
            p.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(str(p), check_same_thread=False, isolation_level=None, timeout=30.0)
        try:
            use_wal(conn)
            conn.execute("PRAGMA synchronous=NORMAL")
            names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if CATALOG not in names:
                if names - {META}:
                    raise IndexCorruptError(f"{p} is an SQLite file but not a table store (it has tables "
                                            f"{', '.join(sorted(names)[:5])})")
                conn.executescript(_SCHEMA)
                conn.execute(f"INSERT OR IGNORE INTO {META} VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
                conn.execute(f"INSERT OR IGNORE INTO {META} VALUES ('generation', '0')")
            row = conn.execute(f"SELECT value FROM {META} WHERE key = 'schema_version'").fetchone()
            if row is None or int(row[0]) != SCHEMA_VERSION:
                raise IndexCorruptError(f"{p}: table store schema version {row[0] if row else None!r}, this amsrag "
                                        f"reads version {SCHEMA_VERSION}")
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise IndexCorruptError(f"{p} is not a readable table store ({exc})") from exc
        except BaseException:
            conn.close()
            raise
        return cls(p, conn)

    def close(self) -> None:
        """Close the store and every runner it made."""
        with self._lock:
            for runner in list(self._runners):
                runner.close()
            if self._conn is not None:
                self._conn.close()
                self._conn = None
            self._search.clear()

    def __enter__(self) -> TableStore:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        return self._conn is None

    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            raise TableStoreClosedError(f"the table store {self.path} is closed")
        return self._conn

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            conn = self._db()
            try:
                yield conn
            except sqlite3.DatabaseError as exc:
                if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc):
                    raise
                raise IndexCorruptError(f"table store {self.path}: {exc}") from exc

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """BEGIN IMMEDIATE ... COMMIT; any exception rolls back (a database error is raised as
        StorageError: nothing of the write is kept)."""
        with self._lock:
            conn = self._db()
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    conn.execute(f"UPDATE {META} SET value = CAST(value AS INTEGER) + 1 WHERE key = 'generation'")
                    yield conn
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
                else:
                    conn.execute("COMMIT")
            except sqlite3.Error as exc:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise StorageError(f"writing to the table store {self.path} failed ({exc}); nothing of this "
                                   f"write was kept") from exc

    # ---------------------------------------------------------------- reading
    def generation(self) -> int:
        with self._read() as conn:
            return int(conn.execute(f"SELECT value FROM {META} WHERE key = 'generation'").fetchone()[0])

    def __len__(self) -> int:
        with self._read() as conn:
            return int(conn.execute(f"SELECT COUNT(*) FROM {CATALOG}").fetchone()[0])

    def __contains__(self, table_id: object) -> bool:
        with self._read() as conn:
            return conn.execute(f"SELECT 1 FROM {CATALOG} WHERE table_id = ?", (table_id,)).fetchone() is not None

    def profiles(self) -> list[TableProfile]:
        """Every stored table's profile, by table id."""
        with self._read() as conn:
            rows = conn.execute(f"SELECT profile_json FROM {CATALOG} ORDER BY table_id").fetchall()
        return [TableProfile.from_dict(json.loads(r[0])) for r in rows]

    def profile(self, table_id: str) -> TableProfile | None:
        with self._read() as conn:
            row = conn.execute(f"SELECT profile_json FROM {CATALOG} WHERE table_id = ?", (table_id,)).fetchone()
        return None if row is None else TableProfile.from_dict(json.loads(row[0]))

    def table_ids(self, doc_id: str | None = None) -> list[str]:
        """Stored table ids (of one document when `doc_id` is given), sorted."""
        with self._read() as conn:
            if doc_id is None:
                rows = conn.execute(f"SELECT table_id FROM {CATALOG} ORDER BY table_id").fetchall()
            else:
                rows = conn.execute(f"SELECT table_id FROM {CATALOG} WHERE doc_id = ? ORDER BY table_id",
                                    (doc_id,)).fetchall()
        return [r[0] for r in rows]

    def get(self, table_id: str) -> Table | None:
        """The stored table as it was added (header and rows from the profile and the SQL table)."""
        profile = self.profile(table_id)
        if profile is None:
            return None
        cols = ", ".join(c.sql_name for c in profile.columns)
        with self._read() as conn:
            rows = conn.execute(f"SELECT {cols} FROM {profile.sql_name} ORDER BY row_id").fetchall()
        return Table(profile.table_id, tuple(c.name for c in profile.columns), tuple(tuple(r) for r in rows),
                     profile.title, profile.source, dict(profile.metadata))

    def sql_names(self) -> list[str]:
        with self._read() as conn:
            return [r[0] for r in conn.execute(f"SELECT sql_name FROM {CATALOG} ORDER BY sql_name")]

    # ---------------------------------------------------------------- writing
    def add(self, tables: Sequence[Table], replace: bool = False) -> TableWriteReport:
        """Store `tables` in one transaction (all or nothing). A table id stored with the same content is
        skipped; with other content it is an InputError, unless `replace` (the old table is dropped)."""
        return self._writes.add(tables, replace)

    def delete(self, table_ids: Sequence[str]) -> TableDeleteReport:
        """Drop the tables (all or nothing: an id not stored is an InputError and nothing is deleted)."""
        return self._writes.delete(table_ids)

    # ---------------------------------------------------------------- querying
    def runner(self, timeout_s: float = DEFAULT_TIMEOUT_S, row_limit: int = DEFAULT_ROW_LIMIT) -> SqliteTableRunner:
        """A runner of guarded SELECTs on a read-only connection of its own (closed with the store).
        Runners are cheap to keep: make one per timeout / row limit and reuse it."""
        with self._lock:
            self._db()
            runner = SqliteTableRunner(self.path, timeout_s, row_limit)
            self._runners.add(runner)
        return runner

    def search(self, question: str, k: int = 5) -> list[TableHit]:
        """The `k` stored tables that best match `question` (BM25, see `store.table_search`)."""
        return self._searcher().search(question, k)

    def _searcher(self) -> TableSearch:
        def entries() -> list[tuple[str, str, TableProfile]]:
            with self._read() as conn:
                rows = conn.execute(f"SELECT table_id, content_sha256, profile_json FROM {CATALOG} "
                                    f"ORDER BY table_id").fetchall()
            return [(t, h, TableProfile.from_dict(json.loads(p))) for t, h, p in rows]

        def values_of(ids: list[str]) -> dict[str, list[str]]:
            out: dict[str, list[str]] = {}
            with self._read() as conn:
                for i in range(0, len(ids), 900):
                    chunk = ids[i : i + 900]
                    marks = ",".join("?" * len(chunk))
                    q = f"SELECT table_id, search_values FROM {CATALOG} WHERE table_id IN ({marks})"
                    out.update({t: json.loads(v) for t, v in conn.execute(q, chunk)})
            return out

        return self._search.searcher(self.generation(), entries, values_of)


class SqliteTableStatements:
    """The embedded store's SQL of a table write (`store.table_writes.TableStatements`)."""

    def stored(self, conn: sqlite3.Connection, ids: Sequence[str]) -> dict[str, tuple[str, str]]:
        out: dict[str, tuple[str, str]] = {}
        for i in range(0, len(ids), 900):
            chunk = list(ids[i : i + 900])
            q = (f"SELECT table_id, sql_name, content_sha256 FROM {CATALOG} "
                 f"WHERE table_id IN ({','.join('?' * len(chunk))})")
            out.update({r[0]: (r[1], r[2]) for r in conn.execute(q, chunk)})
        return out

    def remove_replaced(self, conn: sqlite3.Connection, table_id: str, sql_name: str) -> None:
        conn.execute(f"DROP TABLE IF EXISTS {sql_name}")
        conn.execute(f"DELETE FROM {CATALOG} WHERE table_id = ?", (table_id,))

    def sql_name_owner(self, conn: sqlite3.Connection, sql_name: str) -> str | None:
        other = conn.execute(f"SELECT table_id FROM {CATALOG} WHERE sql_name = ?", (sql_name,)).fetchone()
        return None if other is None else str(other[0])

    def write_table(self, conn: sqlite3.Connection, table: Table, profile: TableProfile, sha256: str) -> None:
        conn.execute(create_statement(profile))
        insert = insert_statement(profile)
        batch: list[tuple[object, ...]] = []
        for values in row_values(table):
            batch.append(values)
            if len(batch) >= INSERT_BATCH:
                conn.executemany(insert, batch)
                batch = []
        if batch:
            conn.executemany(insert, batch)
        for stmt in index_statements(profile):
            conn.execute(stmt)
        conn.execute(f"INSERT INTO {CATALOG} VALUES (?, ?, ?, ?, ?, ?)",
                     (table.table_id, profile.sql_name, doc_id_of(table), sha256,
                      json.dumps(profile.to_dict(), ensure_ascii=False),
                      json.dumps(search_values(table), ensure_ascii=False)))

    def remove(self, conn: sqlite3.Connection, sql_names: dict[str, str]) -> None:
        for table_id, sql_name in sql_names.items():
            conn.execute(f"DROP TABLE {sql_name}")
            conn.execute(f"DELETE FROM {CATALOG} WHERE table_id = ?", (table_id,))


class SqliteTableRunner:
    """Runs guarded SELECTs on a read-only connection of its own (see the module docstring)."""

    def __init__(self, path: Path, timeout_s: float = DEFAULT_TIMEOUT_S, row_limit: int = DEFAULT_ROW_LIMIT) -> None:
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be positive, got {timeout_s}")
        if row_limit < 1:
            raise ValueError(f"row_limit must be at least 1, got {row_limit}")
        self.path = path
        self.timeout_s = timeout_s
        self.row_limit = row_limit
        self._lock = threading.Lock()
        uri = f"file:{quote(str(path.resolve()))}?mode=ro"
        try:
            conn = sqlite3.connect(uri, uri=True, check_same_thread=False, isolation_level=None, timeout=5.0)
            conn.execute("PRAGMA query_only = ON")
        except sqlite3.DatabaseError as exc:
            raise IndexCorruptError(f"cannot open {path} read-only ({exc})") from exc
        conn.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
        conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
        self._conn: sqlite3.Connection | None = conn
        self._allowed: frozenset[str] = frozenset()

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> SqliteTableRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _authorize(self, action: int, arg1: str | None, arg2: str | None, db: str | None, _source: str | None) -> int:
        if action == sqlite3.SQLITE_SELECT:
            return sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_READ:
            if db in ("main", None) and arg1 is not None and arg1.lower() in self._allowed:
                return sqlite3.SQLITE_OK
            return sqlite3.SQLITE_DENY
        if action == sqlite3.SQLITE_FUNCTION and arg2 is not None and arg2.lower() in _SQLITE_FUNCTIONS:
            return sqlite3.SQLITE_OK
        return sqlite3.SQLITE_DENY

    def run(self, sql: str, params: Sequence[object] = ()) -> QueryRows:
        with self._lock:
            conn = self._conn
            if conn is None:
                raise TableStoreClosedError(f"the runner of {self.path} is closed")
            try:
                names = frozenset(r[0].lower() for r in conn.execute(f"SELECT sql_name FROM {CATALOG}"))
            except sqlite3.DatabaseError as exc:
                raise IndexCorruptError(f"table store {self.path}: {exc}") from exc
            from amsrag.tables.guard import guard  # sqlglot: only when a statement runs

            checked = guard(sql, names, "sqlite", self.row_limit + 1, list(params))
            self._allowed = names
            deadline = time.monotonic() + self.timeout_s
            timed_out = False

            def progress() -> int:
                nonlocal timed_out
                if time.monotonic() > deadline:
                    timed_out = True
                    return 1
                return 0

            conn.set_authorizer(self._authorize)
            conn.set_progress_handler(progress, PROGRESS_STEPS)
            try:
                cur = conn.execute(checked.sql, checked.params)
                got: list[Any] = cur.fetchmany(self.row_limit + 1)
                columns = tuple(d[0] for d in cur.description or ())
                cur.close()
            except sqlite3.Error as exc:
                if timed_out:
                    raise SqlTimeout(f"the statement ran longer than {self.timeout_s:g} s and was stopped") from None
                from amsrag.tables.guard import SqlExecutionError

                raise SqlExecutionError(f"the statement failed: {exc}") from None
            finally:
                conn.set_progress_handler(None, 0)
                conn.set_authorizer(None)
        truncated = len(got) > self.row_limit
        return QueryRows(columns, tuple(tuple(r) for r in got[: self.row_limit]), truncated)


def _satisfies_protocol(runner: SqliteTableRunner) -> SqlRunner:
    return runner  # mypy checks that SqliteTableRunner is a SqlRunner
