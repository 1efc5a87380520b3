"""The write and delete lifecycle of a table store, written once for both backends (issue 41): the embedded
`store.embedded.tables.TableStore` and `store.postgres.tables.PgTableStore` run `add_tables` and
`delete_tables` inside their own write transaction, over the statements of their SQL (`TableStatements`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Generic, Protocol, TypeVar

from amsrag.errors import InputError
from amsrag.tables.catalog import (
    TableDeleteReport,
    TableWriteReport,
    content_sha256,
    plan_writes,
    sql_name_for,
    validate_tables,
)
from amsrag.tables.table import Table, TableProfile, profile_table

C = TypeVar("C")
C_contra = TypeVar("C_contra", contravariant=True)


class TableStatements(Protocol[C_contra]):
    """What a backend runs on the connection of a write transaction."""

    def stored(self, conn: C_contra, ids: Sequence[str]) -> dict[str, tuple[str, str]]:
        """{table_id: (sql_name, content_sha256)} of the stored ones among `ids`."""
        ...

    def remove_replaced(self, conn: C_contra, table_id: str, sql_name: str) -> None:
        """Drop a table about to be written again, and its catalog row."""
        ...

    def sql_name_owner(self, conn: C_contra, sql_name: str) -> str | None:
        """The stored table id whose SQL table is `sql_name`, if any."""
        ...

    def write_table(self, conn: C_contra, table: Table, profile: TableProfile, sha256: str) -> None:
        """Create the SQL table of `profile`, fill it with `table`'s rows, index it and enter it in the catalog."""
        ...

    def remove(self, conn: C_contra, sql_names: dict[str, str]) -> None:
        """Drop the tables {table_id: sql_name} and their catalog rows."""
        ...


class TableLifecycle(Generic[C]):
    """`add` and `delete` of a table store: `transaction()` is the store's write transaction (all or nothing,
    the store's generation bumped), `statements` its backend's SQL."""

    def __init__(self, transaction: Callable[[], AbstractContextManager[C]], statements: TableStatements[C]) -> None:
        self.transaction = transaction
        self.statements = statements

    def add(self, tables: Sequence[Table], replace: bool = False) -> TableWriteReport:
        """Store `tables` in one transaction (all or nothing). A table id stored with the same content is
        skipped; with other content it is an InputError, unless `replace` (the old table is dropped)."""
        tables = list(tables)
        validate_tables(tables)
        if not tables:
            return TableWriteReport()
        hashes = [content_sha256(t) for t in tables]
        added = replaced = skipped = n_rows = 0
        written: list[str] = []
        sql = self.statements
        with self.transaction() as conn:
            stored = sql.stored(conn, [t.table_id for t in tables])
            plan, skipped = plan_writes(tables, hashes, stored, replace)
            for t, h, existed in plan:
                name = sql_name_for(t.table_id)
                if existed:
                    sql.remove_replaced(conn, t.table_id, stored[t.table_id][0])
                    replaced += 1
                else:
                    other = sql.sql_name_owner(conn, name)
                    if other is not None:
                        raise InputError(f"tables {t.table_id!r} and {other!r} hash to the same SQL name {name}")
                    added += 1
                sql.write_table(conn, t, profile_table(t, name), h)
                n_rows += len(t.rows)
                written.append(t.table_id)
        return TableWriteReport(added, replaced, skipped, n_rows, tuple(written))

    def delete(self, table_ids: Sequence[str]) -> TableDeleteReport:
        """Drop the tables (all or nothing: an id not stored is an InputError and nothing is deleted)."""
        ids = list(dict.fromkeys(table_ids))
        if not ids:
            raise InputError("no table ids to delete")
        with self.transaction() as conn:
            stored = self.statements.stored(conn, ids)
            missing = [i for i in ids if i not in stored]
            if missing:
                raise InputError(f"{len(missing)} table id(s) not in the store, e.g. {missing[0]!r}; nothing deleted")
            self.statements.remove(conn, {i: stored[i][0] for i in ids})
        return TableDeleteReport(len(ids), tuple(ids))
