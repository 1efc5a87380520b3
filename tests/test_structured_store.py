"""The table stores (embedded SQLite and PostgreSQL) through one conformance suite, plus what is
particular to each: the embedded file's read-only runner, its indexes and errors, and the guard."""

from __future__ import annotations

import sqlite3
import time

import pytest

from amsrag.errors import IndexCorruptError, IndexNotFoundError, StorageError
from amsrag.store.embedded.tables import TableStore, TableStoreClosedError
from amsrag.tables.base import SqlRefused
from amsrag.tables.guard import check_sql, guard
from amsrag.tables.table import Table
from amsrag.testing.tables import TableStoreConformance, cities, players


class TestEmbeddedTableStore(TableStoreConformance):
    backend = "embedded"

    def create_store(self, request, directory):
        return TableStore.open(directory / "tables.sqlite", create=True)

    def reopen(self, store):
        return TableStore.open(store.path)


class TestPostgresTableStore(TableStoreConformance):
    backend = "postgres"

    def create_store(self, request, directory):
        from amsrag.store.postgres.tables import PgTableStore
        from pg_server import new_database

        return PgTableStore.open(new_database(request.getfixturevalue("pg_server")), create=True)

    def reopen(self, store):
        from amsrag.store.postgres.tables import PgTableStore

        return PgTableStore.open(store.pool.conninfo)


# ---------------------------------------------------------------------------------------------- embedded
def test_open_errors(tmp_path) -> None:
    with pytest.raises(IndexNotFoundError, match="no table store"):
        TableStore.open(tmp_path / "missing.sqlite")
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"this is not a database" * 100)
    with pytest.raises(IndexCorruptError, match="not a readable table store"):
        TableStore.open(junk)
    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE passages (id TEXT)")
    with pytest.raises(IndexCorruptError, match="not a table store"):
        TableStore.open(other)
    store = TableStore.open(tmp_path, create=True)  # a directory: its tables.sqlite
    assert store.path == tmp_path / "tables.sqlite"
    with store:
        store.add([cities()])
    assert store.closed
    with pytest.raises(TableStoreClosedError, match="closed"):
        len(store)
    with pytest.raises(TableStoreClosedError):
        store.search("oslo")


def test_runner_connection_cannot_write_even_unguarded(tmp_path) -> None:
    """The runner's own connection: read-only file, query_only, no ATTACH, an authorizer."""
    store = TableStore.open(tmp_path / "t.sqlite", create=True)
    store.add([cities()])
    runner = store.runner()
    conn = runner._conn  # the second barrier, tried without the guard in front of it
    assert conn is not None
    with pytest.raises(sqlite3.OperationalError):
        conn.execute(f"DELETE FROM {store.profiles()[0].sql_name}")
    with pytest.raises(sqlite3.OperationalError):
        conn.execute("ATTACH DATABASE ':memory:' AS x")
    conn.set_authorizer(runner._authorize)
    runner._allowed = frozenset({store.profiles()[0].sql_name})
    with pytest.raises(sqlite3.DatabaseError, match=r"prohibited|not authorized"):
        conn.execute("SELECT sql FROM sqlite_master").fetchall()
    with pytest.raises(sqlite3.DatabaseError, match="not authorized"):
        conn.execute("SELECT sqlite_version()").fetchall()
    conn.set_authorizer(None)
    assert len(store.get("kb/cities.csv").rows) == 5  # type: ignore[union-attr]
    runner.close()
    store.close()


def test_value_lookups_use_the_lower_index(tmp_path) -> None:
    store = TableStore.open(tmp_path / "t.sqlite", create=True)
    store.add([players(2000)])
    name = store.profiles()[0].sql_name
    with sqlite3.connect(store.path) as conn:
        for sql in (f"SELECT c2 FROM {name} WHERE lower(c0) = lower(?)",
                    f"SELECT c2 FROM {name} WHERE lower(c0) IN (lower(?), lower(?))"):
            plan = " ".join(str(r[3]) for r in conn.execute("EXPLAIN QUERY PLAN " + check_sql(sql, {name}),
                                                               ["a", "b"][: sql.count("?")]))
            assert f"USING INDEX {name}_c0_lower" in plan, plan
        indexes = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = ?",
                                               (name,))}
    assert indexes == {f"{name}_c0_lower", f"{name}_c1_lower", f"{name}_c3_lower"}  # not the number column c2
    assert store.runner().run(f"SELECT c2 FROM {name} WHERE lower(c0) = lower(?)", ["PLAYER 1234"]).rows == \
        (("12340",),)
    small = Table("small.csv", ("Name",), (("a",),))
    store.add([small])
    with sqlite3.connect(store.path) as conn:
        n = conn.execute("SELECT COUNT(*) FROM sqlite_master WHERE type = 'index' AND tbl_name = ?",
                         (store.profile("small.csv").sql_name,)).fetchone()[0]  # type: ignore[union-attr]
    assert n == 0  # below INDEX_MIN_ROWS: scanned
    store.close()


@pytest.mark.slow
def test_lookup_on_100k_rows_is_fast(tmp_path) -> None:
    rows = tuple((f"name {i}", str(i)) for i in range(100_000))
    store = TableStore.open(tmp_path / "t.sqlite", create=True)
    store.add([Table("big.csv", ("Name", "Value"), rows)])
    name = store.profiles()[0].sql_name
    runner = store.runner()
    t0 = time.perf_counter()
    for i in range(100):
        assert runner.run(f"SELECT c1 FROM {name} WHERE lower(c0) = lower(?)", [f"NAME {i * 997}"]).rows
    assert (time.perf_counter() - t0) / 100 < 0.01
    store.close()


# ---------------------------------------------------------------------------------------------- the guard
@pytest.mark.parametrize("sql,want", [
    ("SELECT c0 FROM t", "SELECT c0 FROM t LIMIT 100"),
    ("SELECT c0 FROM t LIMIT 5000", "SELECT c0 FROM t LIMIT 100"),
    ("SELECT c0 FROM t LIMIT -1", "SELECT c0 FROM t LIMIT 100"),
    ("SELECT c0 FROM t LIMIT 7", "SELECT c0 FROM t LIMIT 7"),
    ("select c0 from t where c1 = ? /* hidden; drop table t */", "SELECT c0 FROM t WHERE c1 = ? LIMIT 100"),
    ("SELECT c0 FROM t UNION SELECT c0 FROM u", "SELECT c0 FROM t UNION SELECT c0 FROM u LIMIT 100"),
    ("SELECT ifnull(c0, '') FROM t;", "SELECT COALESCE(c0, '') FROM t LIMIT 100"),
])
def test_check_sql_renders_with_a_limit(sql, want) -> None:
    assert check_sql(sql, {"t", "u"}, row_limit=100) == want


def test_check_sql_postgres() -> None:
    got = check_sql("SELECT user, c0 FROM T WHERE c1 LIKE 'a%' AND c2 = ? COLLATE NOCASE ORDER BY ROUND(c3_num, 1)",
                    {"t"}, dialect="postgres", row_limit=10)
    assert got == ('SELECT "user", "c0" FROM "t" WHERE "c1" ILIKE \'a%\' AND LOWER("c2") = LOWER(%s) '
                   'ORDER BY ROUND(CAST("c3_num" AS DECIMAL), 1) NULLS FIRST LIMIT 10')
    inlined = guard("SELECT c0 FROM t WHERE c0 = ? AND c1_num > ?", {"t"}, "postgres", 5, ["it's", -2.5])
    assert inlined.sql == 'SELECT "c0" FROM "t" WHERE "c0" = \'it\'\'s\' AND "c1_num" > -2.5 LIMIT 5'
    assert inlined.params == {}


@pytest.mark.parametrize("sql,match", [
    ("SELECT 1; SELECT 2", "stacked statements"),
    ("INSERT INTO t VALUES (1)", "writes are not allowed: INSERT"),
    ("SELECT * FROM x", "table 'x' is not allowed"),
    ("SELECT load_extension('a')", "function 'load_extension' is not allowed"),
    ("SELECT c0 FROM t WHERE", "cannot parse"),
    ("SELECT c0 FROM t LIMIT ?", "LIMIT must be a whole number"),
    ("SELECT c0 FROM t WHERE c0 = $1", "only \\? parameters"),
    ("SELECT " + "1 + " * 10_000 + "1", "statement too long"),
])
def test_check_sql_refusals(sql, match) -> None:
    with pytest.raises(SqlRefused, match=match):
        check_sql(sql, {"t"})


def test_parameters_bind_in_text_order() -> None:
    """A CTE's parameter comes first in the text though sqlglot keeps the WITH clause last."""
    checked = guard("WITH x AS (SELECT c0 FROM t WHERE c1 = ?) SELECT c0 FROM x WHERE c0 LIKE ?", {"t"},
                    params=["one", "tw%"])
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE t (c0 TEXT, c1 TEXT)")
    conn.executemany("INSERT INTO t VALUES (?, ?)", [("two", "one"), ("twelve", "other")])
    assert conn.execute(checked.sql, checked.params).fetchall() == [("two",)]


# ---------------------------------------------------------------------------------------------- postgres
def test_postgres_reader_role_and_lookup_index(pg_url) -> None:
    """The runner's second barrier in PostgreSQL: a READ ONLY transaction as a role that may read the
    user tables only; and lookups use the lower(cN) index."""
    import psycopg

    from amsrag.store.postgres.tables import READER_ROLE, SCHEMA, PgTableStore, PgTableStoreError

    store = PgTableStore.open(pg_url, create=True)
    store.add([players(2000), cities()])
    name = store.profile("kb/players.csv").sql_name  # type: ignore[union-attr]
    assert store.reader_role  # the test server's login may create roles
    with psycopg.connect(pg_url, autocommit=True) as conn:
        with conn.transaction():
            conn.execute(f"SET LOCAL ROLE {READER_ROLE}")
            assert conn.execute(f"SELECT COUNT(*) FROM {SCHEMA}.{name}").fetchone() == (2000,)
        for sql in (f"SELECT * FROM {SCHEMA}.catalog", f"DELETE FROM {SCHEMA}.{name}"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege), conn.transaction():
                conn.execute(f"SET LOCAL ROLE {READER_ROLE}")
                conn.execute(sql)
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction), conn.transaction():
            conn.execute("SET TRANSACTION READ ONLY")
            conn.execute(f"DELETE FROM {SCHEMA}.{name}")
        conn.execute("SET enable_seqscan = off")
        conn.execute(f"SET search_path = {SCHEMA}")
        sql = check_sql(f"SELECT c2 FROM {name} WHERE lower(c0) = lower(?)", {name}, "postgres")
        plan = " ".join(r[0] for r in conn.execute("EXPLAIN " + sql.replace("%s", "'player 7'")).fetchall())
        assert f"{name}_c0_lower" in plan, plan
    got = store.runner().run(f"SELECT c2 FROM {name} WHERE lower(c0) = lower(?)", ["PLAYER 7"])
    assert got.rows == (("70",),)
    store.close()
    with pytest.raises(PgTableStoreError, match="closed"):
        len(store)


def test_a_write_failing_midway_leaves_nothing(tmp_path) -> None:
    """A real failure inside the transaction (the second table's SQL name is taken by a table made
    outside the store): the first table of the batch is not stored, the earlier ones are intact."""
    from amsrag.tables.catalog import sql_name_for

    store = TableStore.open(tmp_path / "t.sqlite", create=True)
    store.add([cities()])
    with sqlite3.connect(store.path) as conn:
        conn.execute(f"CREATE TABLE {sql_name_for('kb/blocked.csv')} (x TEXT)")
    blocked = Table("kb/blocked.csv", ("a",), (("1",),))
    with pytest.raises(StorageError, match=r"already exists.*nothing of this write was kept"):
        store.add([players(), blocked])
    assert store.table_ids() == ["kb/cities.csv"] and store.profile("kb/players.csv") is None
    with sqlite3.connect(store.path) as conn:
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert sql_name_for("kb/players.csv") not in names
    assert store.get("kb/cities.csv") == cities()
    assert [h.table_id for h in store.search("player points norway", 3)] == ["kb/cities.csv"]
    store.close()


def test_postgres_write_failing_midway_leaves_nothing(pg_url) -> None:
    import psycopg

    from amsrag.store.postgres.tables import SCHEMA, PgTableStore
    from amsrag.tables.catalog import sql_name_for

    store = PgTableStore.open(pg_url, create=True)
    store.add([cities()])
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {SCHEMA}.{sql_name_for('kb/blocked.csv')} (x text)")
    with pytest.raises(StorageError, match="already exists"):
        store.add([players(), Table("kb/blocked.csv", ("a",), (("1",),))])
    assert store.table_ids() == ["kb/cities.csv"] and store.profile("kb/players.csv") is None
    with psycopg.connect(pg_url, autocommit=True) as conn:
        assert conn.execute("SELECT to_regclass(%s)", (f"{SCHEMA}.{sql_name_for('kb/players.csv')}",)).fetchone() \
            == (None,)
    assert store.get("kb/cities.csv") == cities()
    store.close()


def test_catalog_search_tokenises_only_new_tables() -> None:
    from amsrag.store.table_search import CatalogSearch
    from amsrag.tables.table import profile_table

    tables = {t.table_id: t for t in (cities(), players())}
    asked: list[list[str]] = []

    def entries():
        return [(tid, "h", profile_table(t, "t_x")) for tid, t in sorted(tables.items())]

    def values_of(ids):
        asked.append(sorted(ids))
        return {i: [c for row in tables[i].rows for c in row] for i in ids}

    cache = CatalogSearch()
    first = cache.searcher(1, entries, values_of)
    assert cache.searcher(1, entries, values_of) is first and asked == [["kb/cities.csv", "kb/players.csv"]]
    tables["kb/lakes.csv"] = Table("kb/lakes.csv", ("Lake",), (("Titicaca",),))
    second = cache.searcher(2, entries, values_of)
    assert asked[-1] == ["kb/lakes.csv"] and len(second) == 3
    assert second.search("lake titicaca", 1)[0].table_id == "kb/lakes.csv"
    assert second.search("Bergen", 1)[0].table_id == "kb/cities.csv"  # the cached tokens still count


def test_cached_checks_still_check_tables_and_values() -> None:
    sql = "SELECT c0 FROM t WHERE c0 LIKE ?"
    assert guard(sql, {"t"}, params=["%a%"]).sql == "SELECT c0 FROM t WHERE c0 LIKE :__amsrag_p0 LIMIT 1000"
    with pytest.raises(SqlRefused, match="table 't' is not allowed"):
        guard(sql, {"u"}, params=["%a%"])
    with pytest.raises(SqlRefused, match="wildcards"):
        guard(sql, {"t"}, params=["%a%b%c%d%e%f%"])
    with pytest.raises(SqlRefused, match="1 \\? parameter"):
        guard(sql, {"t"}, params=[])
    with pytest.raises(SqlRefused, match="not bytes"):
        guard(sql, {"t"}, params=[b"%a%"])
    assert check_sql(sql, {"T"}) == "SELECT c0 FROM t WHERE c0 LIKE ? LIMIT 1000"
