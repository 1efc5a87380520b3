"""The table store conformance suite: `TableStore` (embedded) and `PgTableStore` behave alike.

Subclass `TableStoreConformance` in a test module (its name starting with `Test`) and implement
`create_store` (a new empty store of the backend) and `reopen` (the same store opened again). The
suite covers writes (add / skip / replace / delete, all or nothing), profiles, the runner's results
and the hostile inputs a runner must refuse or bound: writes, stacked statements, comments hiding
a second statement, other tables (the catalog, the system catalogs), disallowed functions,
pathological LIKE patterns, a huge result, a slow query. After each, the stored data is checked
intact.

This module imports pytest; nothing else in amsrag imports it.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from itertools import pairwise
from pathlib import Path
from typing import Any, ClassVar

import pytest

from amsrag.errors import InputError
from amsrag.tables.base import SqlRefused, SqlTimeout
from amsrag.tables.guard import SqlExecutionError
from amsrag.tables.table import Table, profile_table

StoreFactory = Callable[[], Any]


def players(n: int = 40, table_id: str = "kb/players.csv") -> Table:
    countries = ["Norway", "France", "Peru", "Chile"]
    rows = tuple((f"Player {i}", countries[i % 4], str(10 * i), f"{1980 + i % 20}-05-01") for i in range(n))
    return Table(table_id, ("Name", "Country", "Points", "Born"), rows, "Players of the season", "kb/players.csv")


def cities() -> Table:
    rows = (("Oslo", "Norway", "709,037"), ("Bergen", "Norway", "291,940"), ("Lyon", "France", "522,250"),
            ("Lima", "Peru", "10,004,141"), ("it's", "Nowhere", ""))
    return Table("kb/cities.csv", ("City", "Country", "Population"), rows, "Largest cities", "kb/cities.csv")


def rivers() -> Table:
    rows = (("Glomma", "Norway", "621"), ("Loire", "France", "1,006"), ("Amazon", "Peru", "6,400"))
    return Table("kb/rivers.xlsx#Sheet1", ("River", "Country", "Length (km)"), rows, "Longest rivers")


HOSTILE_WRITES = [
    ("INSERT INTO {t} VALUES (999, 'x', NULL, 'y', NULL, 'z', NULL, 'w', NULL)", "writes are not allowed: INSERT"),
    ("UPDATE {t} SET c0 = 'hacked'", "writes are not allowed: UPDATE"),
    ("DELETE FROM {t}", "writes are not allowed: DELETE"),
    ("DROP TABLE {t}", "writes are not allowed: DROP"),
    ("CREATE TABLE evil (a TEXT)", "writes are not allowed: CREATE"),
    ("ALTER TABLE {t} ADD COLUMN evil TEXT", "writes are not allowed: ALTER"),
    ("REPLACE INTO {t} (row_id, c0) VALUES (0, 'x')", "writes are not allowed: REPLACE"),
    ("ATTACH DATABASE '/tmp/evil.sqlite' AS evil", "not ATTACH"),
    ("PRAGMA writable_schema = ON", "not PRAGMA"),
    ("VACUUM", "not VACUUM"),
    ("WITH gone AS (DELETE FROM {t} RETURNING *) SELECT * FROM gone", "writes are not allowed: DELETE"),
    ("SELECT * INTO evil FROM {t}", "writes are not allowed"),
    ("SELECT c0 FROM {t} FOR UPDATE", "locking reads"),
]
STACKED = [
    "SELECT 1; DROP TABLE {t}",
    "SELECT c0 FROM {t}; DELETE FROM {t}",
    "SELECT c0 FROM {t} /* comment */; UPDATE {t} SET c0 = 'x' -- trailing",
    "SELECT 1;\nCOMMIT;\nDROP TABLE {t}",
]
OTHER_TABLES = [
    ("SELECT * FROM sqlite_master", "sqlite_master"),
    ("SELECT name FROM sqlite_schema", "sqlite_schema"),
    ("SELECT * FROM sqlite_temp_master", "sqlite_temp_master"),
    ("SELECT * FROM pg_catalog.pg_user", "pg_catalog.pg_user"),
    ("SELECT usename FROM pg_user", "pg_user"),
    ("SELECT * FROM pg_shadow", "pg_shadow"),
    ("SELECT * FROM information_schema.tables", "information_schema.tables"),
    ("SELECT * FROM not_a_table", "not_a_table"),
    ("SELECT * FROM main.{t}", "main."),
    ("SELECT * FROM amsrag_tables.catalog", "amsrag_tables.catalog"),
    ("WITH x AS (SELECT * FROM sqlite_master) SELECT * FROM x", "sqlite_master"),
    ("SELECT c0 FROM {t} WHERE c0 IN (SELECT name FROM sqlite_master)", "sqlite_master"),
    ("SELECT c0 FROM {t} UNION SELECT sql FROM sqlite_master", "sqlite_master"),
    ("SELECT * FROM pragma_table_info('{t}')", "table functions"),
    ("SELECT * FROM json_each('[1,2]')", "table functions"),
]
FUNCTIONS = [
    ("SELECT load_extension('/tmp/evil.so')", "load_extension"),
    ("SELECT randomblob(1000000000)", "randomblob"),
    ("SELECT zeroblob(1000000000)", "zeroblob"),
    ("SELECT pg_sleep(30)", "pg_sleep"),
    ("SELECT sqlite_version()", "sqlite_version"),
    ("SELECT version()", "version"),
    ("SELECT pg_read_file('/etc/passwd')", "pg_read_file"),
    ("SELECT current_setting('data_directory')", "current_setting"),
    ("SELECT set_config('search_path', 'public', false)", "set_config"),
    ("SELECT printf('%s', c0) FROM {t}", "printf"),
    ("SELECT replace(c0, 'a', 'b') FROM {t}", "replace"),
    ("SELECT c0 FROM {t} ORDER BY random()", "random"),
    ("SELECT c0 FROM {t} WHERE c0 REGEXP 'a+'", "regular expressions"),
    ("SELECT c0 FROM {t} WHERE c0 MATCH 'a'", "MATCH"),
    ("SELECT row_number() OVER (ORDER BY c0) FROM {t}", "window functions"),
    ("SELECT CAST(c0 AS regclass) FROM {t}", "cast to"),
]
PATTERNS = [
    "SELECT c0 FROM {t} WHERE c0 LIKE '%a%a%a%a%a%a%a%a%a%a%b'",
    "SELECT c0 FROM {t} WHERE c0 LIKE '" + "_" * 50 + "'",
    "SELECT c0 FROM {t} WHERE c0 LIKE '" + "a" * 101 + "'",
    "SELECT c0 FROM {t} WHERE c0 GLOB '*a*a*a*a*a*a*a*b'",
    "SELECT c0 FROM {t} WHERE c0 LIKE c1",
    "SELECT c0 FROM {t} WHERE c0 LIKE '%' || c1 || '%'",
]


class TableStoreConformance(ABC):
    """The backend-independent table store tests; a subclass per backend supplies the hooks."""

    backend: ClassVar[str] = ""
    TIMEOUT_S: ClassVar[float] = 0.5

    # ---- hooks -------------------------------------------------------------------------
    @abstractmethod
    def create_store(self, request: pytest.FixtureRequest, directory: Path) -> Any:
        """A new empty table store of the backend; `directory` is a fresh path it may use."""

    @abstractmethod
    def reopen(self, store: Any) -> Any:
        """The closed `store` opened again from where it is stored."""

    @pytest.fixture
    def make_store(self, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreFactory]:
        made: list[Any] = []

        def make() -> Any:
            store = self.create_store(request, tmp_path / f"store{len(made)}")
            made.append(store)
            return store

        yield make
        for store in made:
            store.close()

    @pytest.fixture
    def loaded(self, make_store: StoreFactory) -> Any:
        """A store holding players (40 rows), cities and rivers."""
        store = make_store()
        store.add([players(), cities(), rivers()])
        return store

    # ---- helpers -----------------------------------------------------------------------
    @staticmethod
    def sql_name(store: Any, table_id: str = "kb/players.csv") -> str:
        profile = store.profile(table_id)
        assert profile is not None, table_id
        return str(profile.sql_name)

    @staticmethod
    def assert_intact(store: Any, tables: list[Table] | None = None) -> None:
        tables = tables if tables is not None else [players(), cities(), rivers()]
        assert len(store) == len(tables)
        for t in tables:
            got = store.get(t.table_id)
            assert got is not None, t.table_id
            assert (got.header, got.rows, got.title) == (t.header, t.rows, t.title), t.table_id

    def assert_refused(self, store: Any, sql: str, match: str, runner: Any = None) -> None:
        runner = runner or store.runner(timeout_s=self.TIMEOUT_S)
        with pytest.raises(SqlRefused, match=match):
            runner.run(sql.format(t=self.sql_name(store)))

    # ---- writes ------------------------------------------------------------------------
    def test_add_skip_replace_and_conflict(self, make_store: StoreFactory) -> None:
        store = make_store()
        assert len(store) == 0 and store.profiles() == [] and store.search("players", 3) == []
        r = store.add([players(), cities()])
        assert (r.added, r.replaced, r.skipped, r.rows) == (2, 0, 0, 45)
        again = store.add([players(), cities()])
        assert (again.added, again.skipped, again.rows) == (0, 2, 0)
        changed = Table("kb/cities.csv", ("City", "Country"), (("Paris", "France"),), "Cities")
        with pytest.raises(InputError, match="already in the store with different content"):
            store.add([rivers(), changed])
        self.assert_intact(store, [players(), cities()])
        r = store.add([changed], replace=True)
        assert (r.added, r.replaced, r.rows) == (0, 1, 1)
        got = store.get("kb/cities.csv")
        assert got is not None and got.rows == (("Paris", "France"),)
        profile = store.profile("kb/cities.csv")
        rows = store.runner().run(f"SELECT c0 FROM {profile.sql_name}")
        assert rows.rows == (("Paris",),)
        with pytest.raises(InputError, match="duplicate table id"):
            store.add([rivers(), rivers()])
        assert store.profile("kb/rivers.xlsx#Sheet1") is None and store.profile("nope") is None

    def test_failing_add_stores_nothing(self, make_store: StoreFactory) -> None:
        store = make_store()
        store.add([players(), cities()])
        bad_cell = Table("kb/bad.csv", ("a", "b"), (("ok", "fine"), ("x", "nul \x00 here")))
        with pytest.raises(InputError, match=r"row 2, column 2 \('b'\)"):
            store.add([rivers(), bad_cell])
        wide = Table("kb/wide.csv", tuple(f"c{i}" for i in range(201)), ())
        with pytest.raises(InputError, match="201 columns"):
            store.add([rivers(), wide])
        conflict = Table("kb/players.csv", ("Name",), (("someone else",),))
        with pytest.raises(InputError, match="different content"):
            store.add([rivers(), conflict])
        assert store.profile("kb/rivers.xlsx#Sheet1") is None
        self.assert_intact(store, [players(), cities()])
        assert {h.table_id for h in store.search("rivers length km glomma loire", 3)} <= {"kb/players.csv",
                                                                                           "kb/cities.csv"}

    def test_delete_is_all_or_nothing(self, loaded: Any) -> None:
        name = self.sql_name(loaded, "kb/cities.csv")
        with pytest.raises(InputError, match="not in the store"):
            loaded.delete(["kb/cities.csv", "kb/nope.csv"])
        self.assert_intact(loaded)
        with pytest.raises(InputError, match="no table ids"):
            loaded.delete([])
        assert loaded.delete(["kb/cities.csv", "kb/cities.csv"]).deleted == 1
        assert len(loaded) == 2 and loaded.profile("kb/cities.csv") is None
        with pytest.raises(SqlRefused, match="is not allowed"):
            loaded.runner().run(f"SELECT * FROM {name}")
        assert "kb/cities.csv" not in {h.table_id for h in loaded.search("cities oslo bergen lyon", 3)}

    def test_profiles_round_trip(self, loaded: Any) -> None:
        got = {p.table_id: p for p in loaded.profiles()}
        assert sorted(got) == ["kb/cities.csv", "kb/players.csv", "kb/rivers.xlsx#Sheet1"]
        for t in (players(), cities(), rivers()):
            assert got[t.table_id] == profile_table(t, got[t.table_id].sql_name)
            assert got[t.table_id].sql_name.startswith("t_") and len(got[t.table_id].sql_name) == 14
            assert loaded.profile(t.table_id) == got[t.table_id]
        assert got["kb/rivers.xlsx#Sheet1"].column("Length (km)").unit == "km"
        loaded.close()
        again = self.reopen(loaded)
        try:
            assert {p.table_id: p for p in again.profiles()} == got
            self.assert_intact(again)
        finally:
            again.close()

    # ---- the runner ----------------------------------------------------------------------
    def test_runner_results(self, loaded: Any) -> None:
        runner = loaded.runner(row_limit=10)
        p, c = self.sql_name(loaded), self.sql_name(loaded, "kb/cities.csv")
        got = runner.run(f"SELECT c0, c2_num FROM {c} WHERE lower(c1) = lower(?) ORDER BY c2_num DESC", ["NORWAY"])
        assert got.columns == ("c0", "c2_num") and got.rows == (("Oslo", 709037.0), ("Bergen", 291940.0))
        assert not got.truncated
        got = runner.run(f"SELECT c0 FROM {c} WHERE lower(c0) IN (?, ?) ORDER BY row_id", ["lima", "it's"])
        assert got.rows == (("Lima",), ("it's",))
        got = runner.run(f"SELECT COUNT(*), MAX(c2_num), MIN(c2_num), SUM(c2_num) FROM {p} WHERE c1 = 'Peru'")
        assert got.rows == ((10, 380.0, 20.0, 2000.0),)
        got = runner.run(f"SELECT c1, COUNT(*) AS n FROM {p} GROUP BY c1 ORDER BY n DESC, c1 LIMIT 2")
        assert got.rows == (("Chile", 10), ("France", 10))
        got = runner.run(f"SELECT c0 FROM {p} ORDER BY row_id")
        assert len(got.rows) == 10 and got.truncated and got.rows[0] == ("Player 0",)
        got = runner.run(f"SELECT c0 FROM {p} ORDER BY row_id LIMIT 3 OFFSET 2")
        assert got.rows == (("Player 2",), ("Player 3",), ("Player 4",)) and not got.truncated
        got = runner.run(f"SELECT c0 FROM {p} WHERE c0 LIKE 'player 3_' ORDER BY row_id")
        assert [r[0] for r in got.rows] == [f"Player {i}" for i in range(30, 40)]
        got = runner.run(f"WITH n AS (SELECT c1 AS country FROM {c}) SELECT COUNT(DISTINCT country) FROM n")
        assert got.rows == ((4,),)
        got = runner.run(f"SELECT a.c0, b.c0 FROM {c} a JOIN {self.sql_name(loaded, 'kb/rivers.xlsx#Sheet1')} b "
                         f"ON a.c1 = b.c1 WHERE a.c0 = ? ORDER BY b.c0", ["Lima"])
        assert got.rows == (("Lima", "Amazon"),)
        got = runner.run(f"SELECT c0 FROM {c} WHERE c1 = 'France' UNION SELECT c0 FROM {p} WHERE c0 = 'Player 1' "
                         f"ORDER BY 1")
        assert got.rows == (("Lyon",), ("Player 1",))
        got = runner.run(f"SELECT CASE WHEN c2_num > 500000 THEN 'big' ELSE 'small' END AS size FROM {c} "
                         f"WHERE c2_num IS NOT NULL ORDER BY row_id")
        assert [r[0] for r in got.rows] == ["big", "small", "big", "big"]
        for hostile in ("x'; DROP TABLE " + c + "; --", "x\\' OR 1=1 --", "x\\", "\x00' OR '1'='1"):
            assert runner.run(f"SELECT c0 FROM {c} WHERE c0 = ?", [hostile]).rows == ()
        self.assert_intact(loaded)

    def test_runner_errors(self, loaded: Any) -> None:
        runner = loaded.runner()
        p = self.sql_name(loaded)
        with pytest.raises(SqlRefused, match="cannot parse"):
            runner.run("SELECT FROM WHERE (")
        with pytest.raises(SqlRefused, match="empty statement"):
            runner.run("  ")
        with pytest.raises(SqlExecutionError, match="the statement failed"):
            runner.run(f"SELECT c99 FROM {p}")
        with pytest.raises(SqlRefused, match="1 \\? parameter"):
            runner.run(f"SELECT c0 FROM {p} WHERE c0 = ?", [])
        with pytest.raises(SqlRefused, match="only \\? parameters"):
            runner.run(f"SELECT c0 FROM {p} WHERE c0 = :name")
        with pytest.raises(SqlRefused, match="recursive"):
            runner.run("WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) SELECT COUNT(*) FROM n")
        assert runner.run(f"SELECT COUNT(*) FROM {p}").rows == ((40,),)  # still usable

    def test_runner_sees_later_writes(self, make_store: StoreFactory) -> None:
        store = make_store()
        store.add([cities()])
        runner = store.runner()
        store.add([players()])
        assert runner.run(f"SELECT COUNT(*) FROM {self.sql_name(store)}").rows == ((40,),)

    # ---- hostile input -----------------------------------------------------------------
    @pytest.mark.parametrize("sql,match", HOSTILE_WRITES)
    def test_writes_are_refused(self, loaded: Any, sql: str, match: str) -> None:
        self.assert_refused(loaded, sql, match)
        self.assert_intact(loaded)

    @pytest.mark.parametrize("sql", STACKED)
    def test_stacked_statements_are_refused(self, loaded: Any, sql: str) -> None:
        self.assert_refused(loaded, sql, "stacked statements")
        self.assert_intact(loaded)

    def test_comments_cannot_hide_a_statement(self, loaded: Any) -> None:
        p = self.sql_name(loaded)
        runner = loaded.runner()
        for sql in (f"SELECT COUNT(*) FROM {p} /* ; DROP TABLE {p} */",
                    f"SELECT COUNT(*) FROM {p} -- ; DROP TABLE {p}",
                    f"SELECT COUNT(*) /* */ FROM {p} WHERE c0 <> '; DROP TABLE {p}; --'"):
            assert runner.run(sql).rows == ((40,),)
        self.assert_refused(loaded, "SELECT 1 /* x */ ; /* y */ DROP TABLE {t}", "stacked statements")
        self.assert_intact(loaded)

    @pytest.mark.parametrize("sql,match", OTHER_TABLES)
    def test_other_tables_are_refused(self, loaded: Any, sql: str, match: str) -> None:
        self.assert_refused(loaded, sql, "not allowed")
        if match != "table functions":
            self.assert_refused(loaded, sql, match)
        self.assert_intact(loaded)

    def test_the_catalog_is_refused(self, loaded: Any) -> None:
        for name in ("tables_catalog", "tables_meta", "catalog", "meta"):
            self.assert_refused(loaded, f"SELECT * FROM {name}", f"table '{name}' is not allowed")
        self.assert_intact(loaded)

    @pytest.mark.parametrize("sql,match", FUNCTIONS)
    def test_disallowed_functions_are_refused(self, loaded: Any, sql: str, match: str) -> None:
        self.assert_refused(loaded, sql, match)
        self.assert_intact(loaded)

    @pytest.mark.parametrize("sql", PATTERNS)
    def test_pathological_patterns_are_refused(self, loaded: Any, sql: str) -> None:
        self.assert_refused(loaded, sql, "pattern")
        self.assert_intact(loaded)

    def test_pattern_parameters_are_checked(self, loaded: Any) -> None:
        runner = loaded.runner()
        p = self.sql_name(loaded)
        with pytest.raises(SqlRefused, match="wildcards"):
            runner.run(f"SELECT c0 FROM {p} WHERE c0 LIKE ?", ["%a%a%a%a%a%a%a%"])
        assert len(runner.run(f"SELECT c0 FROM {p} WHERE c0 LIKE ?", ["%layer 1%"]).rows) == 11

    def test_a_huge_result_is_truncated_quickly(self, loaded: Any) -> None:
        p = self.sql_name(loaded)
        runner = loaded.runner(timeout_s=5.0, row_limit=100)
        t0 = time.perf_counter()
        got = runner.run(f"SELECT a.c0, b.c0, c.c0, d.c0 FROM {p} a, {p} b, {p} c, {p} d")  # 2.56 M rows
        assert time.perf_counter() - t0 < 2.0
        assert len(got.rows) == 100 and got.truncated
        got = runner.run(f"SELECT a.c0 FROM {p} a, {p} b LIMIT 100000")
        assert len(got.rows) == 100 and got.truncated
        self.assert_intact(loaded)

    def test_a_slow_query_times_out(self, loaded: Any) -> None:
        p = self.sql_name(loaded)
        runner = loaded.runner(timeout_s=self.TIMEOUT_S)
        t0 = time.perf_counter()
        with pytest.raises(SqlTimeout, match="longer than"):
            runner.run(f"SELECT COUNT(*) FROM {p} a, {p} b, {p} c, {p} d, {p} e, {p} f")  # 4e9 rows
        assert time.perf_counter() - t0 < self.TIMEOUT_S + 2.0
        with pytest.raises(SqlTimeout):
            runner.run(f"SELECT MAX(a.c0 || b.c0 || c.c0) FROM {p} a, {p} b, {p} c, {p} d, {p} e ORDER BY 1")
        assert runner.run(f"SELECT COUNT(*) FROM {p}").rows == ((40,),)  # the runner still works
        self.assert_intact(loaded)

    # ---- search ------------------------------------------------------------------------
    def test_search_finds_the_table(self, loaded: Any) -> None:
        assert loaded.search("which city in Norway has the most people?", 1)[0].table_id == "kb/cities.csv"
        assert loaded.search("how long is the Loire river in km", 1)[0].table_id == "kb/rivers.xlsx#Sheet1"
        hits = loaded.search("how many points did Player 7 score", 3)
        assert hits[0].table_id == "kb/players.csv" and hits[0].profile.n_rows == 40
        assert all(a.score >= b.score for a, b in pairwise(hits))
        assert loaded.search("zzzz qqqq", 3) == []
        with pytest.raises(InputError):
            loaded.search("", 3)
        other = Table("kb/lakes.csv", ("Lake", "Country"), (("Mjøsa", "Norway"), ("Titicaca", "Peru")), "Lakes")
        loaded.add([other])
        assert loaded.search("lake titicaca", 1)[0].table_id == "kb/lakes.csv"
        loaded.delete(["kb/lakes.csv"])
        assert "kb/lakes.csv" not in {h.table_id for h in loaded.search("lake titicaca", 3)}
