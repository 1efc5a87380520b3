"""The table store in PostgreSQL: the same API as `store.embedded.tables.TableStore`, in schema `amsrag_tables`.

    amsrag_tables.catalog(table_id PRIMARY KEY, sql_name UNIQUE, doc_id, content_sha256, profile_json jsonb,
                          search_values jsonb)
    amsrag_tables.meta(key PRIMARY KEY, value)  -- schema_version, generation (bumped by every write)
    amsrag_tables.t_<12 hex of sha256(table_id)>  -- row_id integer PRIMARY KEY, cN text NOT NULL,
                                                     cN_num double precision, ...

Value lookups are indexed as `lower(cN)` (every column that is not a number column, in tables of at
least `INDEX_MIN_ROWS` rows), the form `lower(cN) = lower(?)` / `lower(cN) IN (lower(?), ...)` the
embedded store indexes too. Writes are one
transaction each, serialised across processes by an advisory lock. The runner executes what
`check_sql(..., dialect="postgres")` returns (parameters inlined as literals) inside a
`BEGIN READ ONLY` transaction with `SET LOCAL statement_timeout`, `search_path` set to the table
schema and, when the store could create it, `SET LOCAL ROLE amsrag_tables_reader`: a role with
SELECT on the user tables only (not on the catalog), so even a statement the guard let through
could neither write nor read anything else of the schema.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from decimal import Decimal
from types import TracebackType
from typing import Any, TypeVar

import psycopg
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool, PoolTimeout

from amsrag.errors import AmsragError, IndexBusyError, IndexNotFoundError, StorageError
from amsrag.store.embedded.tables import INDEX_MIN_ROWS
from amsrag.store.postgres.connection import CONNECT_TIMEOUT_S
from amsrag.store.table_search import CatalogSearch, TableSearch
from amsrag.store.table_writes import TableLifecycle
from amsrag.tables.base import DEFAULT_ROW_LIMIT, DEFAULT_TIMEOUT_S, QueryRows, SqlRunner, SqlTimeout, TableHit
from amsrag.tables.catalog import (
    TableDeleteReport,
    TableWriteReport,
    doc_id_of,
    search_values,
)
from amsrag.tables.guard import SqlExecutionError, guard
from amsrag.tables.table import Table, TableProfile, row_values

T = TypeVar("T")
SCHEMA = "amsrag_tables"
SCHEMA_VERSION = 1
READER_ROLE = "amsrag_tables_reader"
WRITE_LOCK_KEY = 0x616D7374  # "amst": table writes (the passage store's lock is another key)
LOCK_TIMEOUT_S = 60

_SCHEMA = f"""
CREATE SCHEMA IF NOT EXISTS {SCHEMA};
CREATE TABLE IF NOT EXISTS {SCHEMA}.catalog (
    table_id text PRIMARY KEY,
    sql_name text NOT NULL UNIQUE,
    doc_id text NOT NULL,
    content_sha256 text NOT NULL,
    profile_json jsonb NOT NULL,
    search_values jsonb NOT NULL
);
CREATE INDEX IF NOT EXISTS catalog_doc_id ON {SCHEMA}.catalog (doc_id);
CREATE TABLE IF NOT EXISTS {SCHEMA}.meta (key text PRIMARY KEY, value text NOT NULL);
"""


class PgTableStoreError(AmsragError):
    """The table schema cannot be reached or read."""


def pg_create_statement(profile: TableProfile) -> str:
    cols = ", ".join(f"{c.sql_name} text NOT NULL, {c.num_name} double precision" for c in profile.columns)
    return f"CREATE TABLE {SCHEMA}.{profile.sql_name} (row_id integer PRIMARY KEY, {cols})"


def pg_index_statements(profile: TableProfile) -> list[str]:
    if profile.n_rows < INDEX_MIN_ROWS:
        return []
    return [f"CREATE INDEX {profile.sql_name}_{c.sql_name}_lower ON {SCHEMA}.{profile.sql_name} (lower({c.sql_name}))"
            for c in profile.columns if c.type != "number"]


class PgTableStore:
    """Tables in PostgreSQL. `PgTableStore.open(conninfo_or_pool, create=...)`; close it (or use `with`)."""

    backend = "postgres"

    def __init__(self, pool: ConnectionPool, owns_pool: bool, reader_role: bool) -> None:
        self.pool = pool
        self._owns_pool = owns_pool
        self.reader_role = reader_role
        self._closed = False
        self._search = CatalogSearch()
        self._writes = TableLifecycle(self._transaction, PgTableStatements(reader_role))

    @classmethod
    def open(cls, target: str | ConnectionPool, create: bool = False, pool_size: int = 4) -> PgTableStore:
        """The table store in the database `target` (a conninfo / URL, or a psycopg pool of autocommit
        connections, which the store then uses and does not close); `create`: install the schema."""
        owns = isinstance(target, str)
        if isinstance(target, str):
            pool = ConnectionPool(target, min_size=1, max_size=pool_size, open=False, name="amsrag-tables",
                                  kwargs={"autocommit": True, "connect_timeout": int(CONNECT_TIMEOUT_S)}, timeout=10.0)
            pool.open(wait=False)
        else:
            pool = target
        try:
            reader = cls._install(pool, create)
        except BaseException:
            if owns:
                pool.close()
            raise
        return cls(pool, owns, reader)

    @staticmethod
    def _install(pool: ConnectionPool, create: bool) -> bool:
        with _connection(pool) as conn:
            exists = conn.execute("SELECT to_regclass(%s)", (f"{SCHEMA}.catalog",)).fetchone()
            if exists is None or exists[0] is None:
                if not create:
                    raise IndexNotFoundError(f"no table store in this database (schema {SCHEMA}); create it first")
                with conn.transaction():
                    conn.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT_S}s'")
                    conn.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK_KEY,))
                    conn.execute(_SCHEMA)
                    conn.execute(f"INSERT INTO {SCHEMA}.meta VALUES ('schema_version', %s), ('generation', '0') "
                                 f"ON CONFLICT (key) DO NOTHING", (str(SCHEMA_VERSION),))
            row = conn.execute(f"SELECT value FROM {SCHEMA}.meta WHERE key = 'schema_version'").fetchone()
            if row is None or int(row[0]) != SCHEMA_VERSION:
                raise PgTableStoreError(f"table store schema version {row[0] if row else None!r}; this amsrag reads "
                                        f"version {SCHEMA_VERSION}")
            return _ensure_reader_role(conn)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            if self._owns_pool:
                self.pool.close()
            self._search.clear()

    def __enter__(self) -> PgTableStore:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        return self._closed

    def _read(self, fn: Callable[[psycopg.Connection[Any]], T]) -> T:
        if self._closed:
            raise PgTableStoreError("the table store is closed")
        with _connection(self.pool) as conn:
            return fn(conn)

    @contextmanager
    def _transaction(self) -> Iterator[psycopg.Connection[Any]]:
        if self._closed:
            raise PgTableStoreError("the table store is closed")
        with _connection(self.pool) as conn, _storage_errors(), conn.transaction():
            conn.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT_S}s'")
            conn.execute("SET LOCAL statement_timeout = 0")
            try:
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK_KEY,))
            except psycopg.errors.LockNotAvailable as exc:
                raise IndexBusyError(f"the table store is being written by another process; gave up after "
                                     f"{LOCK_TIMEOUT_S} s") from exc
            conn.execute(f"UPDATE {SCHEMA}.meta SET value = (value::bigint + 1)::text WHERE key = 'generation'")
            yield conn

    # ---------------------------------------------------------------- reading
    def generation(self) -> int:
        return self._read(lambda c: int(_one(c.execute(f"SELECT value FROM {SCHEMA}.meta WHERE key = 'generation'"))))

    def __len__(self) -> int:
        return self._read(lambda c: int(_one(c.execute(f"SELECT COUNT(*) FROM {SCHEMA}.catalog"))))

    def __contains__(self, table_id: object) -> bool:
        return self._read(lambda c: c.execute(f"SELECT 1 FROM {SCHEMA}.catalog WHERE table_id = %s",
                                              (table_id,)).fetchone() is not None)

    def profiles(self) -> list[TableProfile]:
        rows = self._read(lambda c: c.execute(f"SELECT profile_json FROM {SCHEMA}.catalog ORDER BY table_id COLLATE "
                                              f"\"C\"").fetchall())
        return [TableProfile.from_dict(r[0]) for r in rows]

    def profile(self, table_id: str) -> TableProfile | None:
        row = self._read(lambda c: c.execute(f"SELECT profile_json FROM {SCHEMA}.catalog WHERE table_id = %s",
                                             (table_id,)).fetchone())
        return None if row is None else TableProfile.from_dict(row[0])

    def table_ids(self, doc_id: str | None = None) -> list[str]:
        def q(c: psycopg.Connection[Any]) -> list[Any]:
            if doc_id is None:
                return c.execute(f"SELECT table_id FROM {SCHEMA}.catalog ORDER BY table_id COLLATE \"C\"").fetchall()
            return c.execute(f"SELECT table_id FROM {SCHEMA}.catalog WHERE doc_id = %s ORDER BY table_id COLLATE \"C\"",
                             (doc_id,)).fetchall()
        return [r[0] for r in self._read(q)]

    def get(self, table_id: str) -> Table | None:
        profile = self.profile(table_id)
        if profile is None:
            return None
        cols = ", ".join(c.sql_name for c in profile.columns)
        rows = self._read(lambda c: c.execute(f"SELECT {cols} FROM {SCHEMA}.{profile.sql_name} ORDER BY row_id")
                          .fetchall())
        return Table(profile.table_id, tuple(c.name for c in profile.columns), tuple(tuple(r) for r in rows),
                     profile.title, profile.source, dict(profile.metadata))

    def sql_names(self) -> list[str]:
        return [r[0] for r in self._read(lambda c: c.execute(
            f"SELECT sql_name FROM {SCHEMA}.catalog ORDER BY sql_name").fetchall())]

    # ---------------------------------------------------------------- writing
    def add(self, tables: Sequence[Table], replace: bool = False) -> TableWriteReport:
        """Store `tables` in one transaction (all or nothing); see `TableStore.add`."""
        return self._writes.add(tables, replace)

    def delete(self, table_ids: Sequence[str]) -> TableDeleteReport:
        return self._writes.delete(table_ids)

    # ---------------------------------------------------------------- querying
    def runner(self, timeout_s: float = DEFAULT_TIMEOUT_S, row_limit: int = DEFAULT_ROW_LIMIT) -> PgTableRunner:
        if self._closed:
            raise PgTableStoreError("the table store is closed")
        return PgTableRunner(self, timeout_s, row_limit)

    def search(self, question: str, k: int = 5) -> list[TableHit]:
        return self._searcher().search(question, k)

    def _searcher(self) -> TableSearch:
        def entries() -> list[tuple[str, str, TableProfile]]:
            q = f"SELECT table_id, content_sha256, profile_json FROM {SCHEMA}.catalog ORDER BY table_id COLLATE \"C\""
            rows = self._read(lambda c: c.execute(q).fetchall())
            return [(t, h, TableProfile.from_dict(p)) for t, h, p in rows]

        def values_of(ids: list[str]) -> dict[str, list[str]]:
            rows = self._read(lambda c: c.execute(f"SELECT table_id, search_values FROM {SCHEMA}.catalog "
                                                  f"WHERE table_id = ANY(%s)", (ids,)).fetchall())
            return {t: list(v) for t, v in rows}

        return self._search.searcher(self.generation(), entries, values_of)


class PgTableStatements:
    """PostgreSQL's SQL of a table write (`store.table_writes.TableStatements`); `reader_role`: grant the reader
    role SELECT on every table written."""

    def __init__(self, reader_role: bool) -> None:
        self.reader_role = reader_role

    def stored(self, conn: psycopg.Connection[Any], ids: Sequence[str]) -> dict[str, tuple[str, str]]:
        return {r[0]: (r[1], r[2]) for r in conn.execute(
            f"SELECT table_id, sql_name, content_sha256 FROM {SCHEMA}.catalog WHERE table_id = ANY(%s)",
            (list(ids),)).fetchall()}

    def remove_replaced(self, conn: psycopg.Connection[Any], table_id: str, sql_name: str) -> None:
        conn.execute(f"DROP TABLE IF EXISTS {SCHEMA}.{sql_name}")
        conn.execute(f"DELETE FROM {SCHEMA}.catalog WHERE table_id = %s", (table_id,))

    def sql_name_owner(self, conn: psycopg.Connection[Any], sql_name: str) -> str | None:
        other = conn.execute(f"SELECT table_id FROM {SCHEMA}.catalog WHERE sql_name = %s", (sql_name,)).fetchone()
        return None if other is None else str(other[0])

    def write_table(self, conn: psycopg.Connection[Any], table: Table, profile: TableProfile, sha256: str) -> None:
        name = profile.sql_name
        conn.execute(pg_create_statement(profile))
        cols = ["row_id"] + [x for c in profile.columns for x in (c.sql_name, c.num_name)]
        with conn.cursor() as cur, cur.copy(f"COPY {SCHEMA}.{name} ({', '.join(cols)}) FROM STDIN") as copy:
            for values in row_values(table):
                copy.write_row(values)
        for stmt in pg_index_statements(profile):
            conn.execute(stmt)
        if self.reader_role:
            conn.execute(f"GRANT SELECT ON {SCHEMA}.{name} TO {READER_ROLE}")
        conn.execute(f"INSERT INTO {SCHEMA}.catalog VALUES (%s, %s, %s, %s, %s, %s)",
                     (table.table_id, name, doc_id_of(table), sha256, Jsonb(profile.to_dict()),
                      Jsonb(search_values(table))))

    def remove(self, conn: psycopg.Connection[Any], sql_names: dict[str, str]) -> None:
        for sql_name in sql_names.values():
            conn.execute(f"DROP TABLE {SCHEMA}.{sql_name}")
        conn.execute(f"DELETE FROM {SCHEMA}.catalog WHERE table_id = ANY(%s)", (list(sql_names),))


class PgTableRunner:
    """Runs guarded SELECTs in read-only transactions (see the module docstring)."""

    def __init__(self, store: PgTableStore, timeout_s: float, row_limit: int) -> None:
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be positive, got {timeout_s}")
        if row_limit < 1:
            raise ValueError(f"row_limit must be at least 1, got {row_limit}")
        self.store = store
        self.timeout_s = timeout_s
        self.row_limit = row_limit

    def close(self) -> None:
        """Nothing to release (connections come from the store's pool)."""

    def run(self, sql: str, params: Sequence[object] = ()) -> QueryRows:
        def go(conn: psycopg.Connection[Any]) -> QueryRows:
            try:
                with conn.transaction():
                    conn.execute("SET TRANSACTION READ ONLY")
                    conn.execute(f"SET LOCAL statement_timeout = {max(1, int(self.timeout_s * 1000))}")
                    conn.execute("SET LOCAL lock_timeout = 1000")
                    conn.execute("SET LOCAL standard_conforming_strings = on")  # a backslash ends no string
                    conn.execute(f"SET LOCAL search_path = {SCHEMA}")
                    names = {r[0] for r in conn.execute(f"SELECT sql_name FROM {SCHEMA}.catalog").fetchall()}
                    checked = guard(sql, names, "postgres", self.row_limit + 1, list(params))
                    if self.store.reader_role:
                        conn.execute(f"SET LOCAL ROLE {READER_ROLE}")
                    cur = conn.execute(checked.sql)
                    got = cur.fetchmany(self.row_limit + 1)
                    columns = tuple(d.name for d in cur.description or ())
            except psycopg.errors.QueryCanceled:
                raise SqlTimeout(f"the statement ran longer than {self.timeout_s:g} s and was stopped") from None
            except psycopg.OperationalError:
                raise
            except psycopg.Error as exc:
                raise SqlExecutionError(f"the statement failed: {str(exc).strip().splitlines()[0]}") from None
            rows = tuple(tuple(float(v) if isinstance(v, Decimal) else v for v in r) for r in got[: self.row_limit])
            return QueryRows(columns, rows, len(got) > self.row_limit)

        return self.store._read(go)


def _ensure_reader_role(conn: psycopg.Connection[Any]) -> bool:
    """Create the reader role (SELECT on user tables only) if this login may; whether it can be used."""
    try:
        with conn.transaction():
            exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (READER_ROLE,)).fetchone()
            if exists is None:
                conn.execute(f"CREATE ROLE {READER_ROLE} NOLOGIN")
            usage = conn.execute("SELECT has_schema_privilege(%s, %s, 'USAGE')", (READER_ROLE, SCHEMA)).fetchone()
            if not (usage and usage[0]):  # first use in this database: grant on the tables stored so far
                conn.execute(f"GRANT USAGE ON SCHEMA {SCHEMA} TO {READER_ROLE}")
                conn.execute(f"REVOKE ALL ON {SCHEMA}.catalog, {SCHEMA}.meta FROM {READER_ROLE}")
                for (name,) in conn.execute(f"SELECT sql_name FROM {SCHEMA}.catalog").fetchall():
                    conn.execute(f"GRANT SELECT ON {SCHEMA}.{name} TO {READER_ROLE}")
            member = conn.execute("SELECT pg_has_role(current_user, %s, 'MEMBER')", (READER_ROLE,)).fetchone()
            if not (member and member[0]):
                conn.execute(f"GRANT {READER_ROLE} TO current_user")
        return True
    except psycopg.Error:
        return False  # no CREATEROLE / GRANT privilege: the READ ONLY transaction is the only barrier


@contextmanager
def _connection(pool: ConnectionPool) -> Iterator[psycopg.Connection[Any]]:
    try:
        with pool.connection() as conn:
            yield conn
    except (psycopg.OperationalError, PoolTimeout) as exc:
        raise PgTableStoreError(f"PostgreSQL is unavailable ({type(exc).__name__}: {str(exc).strip()})") from exc


@contextmanager
def _storage_errors() -> Iterator[None]:
    """A database error of a write (outside a lost connection) as StorageError; the transaction is rolled back."""
    try:
        yield
    except (psycopg.OperationalError, psycopg.errors.LockNotAvailable):
        raise
    except psycopg.Error as exc:
        raise StorageError(f"writing to the PostgreSQL table store failed ({str(exc).strip().splitlines()[0]}); "
                           f"nothing of this write was kept") from exc


def _one(cur: psycopg.Cursor[Any]) -> Any:
    row = cur.fetchone()
    if row is None:
        raise PgTableStoreError("the table store's meta table is incomplete")
    return row[0]



def _satisfies_protocol(runner: PgTableRunner) -> SqlRunner:
    return runner  # mypy checks that PgTableRunner is a SqlRunner
