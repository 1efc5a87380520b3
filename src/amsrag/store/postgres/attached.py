"""What a PostgreSQL index keeps beside its passages: the tables of the structured route, the corpus themes
and the query library (`TableStorage`, `ThemeStorage`, `LibraryStorage`)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import psycopg
from psycopg.types.json import Jsonb

from amsrag.embed.encoder import DIMENSION
from amsrag.errors import IndexNotFoundError, InputError
from amsrag.indexes.themes import Themes
from amsrag.store.postgres.core import TABLES_RECHECK_S, PgCore, _scalar
from amsrag.store.query_library import QueryLibrary
from amsrag.tables.catalog import TableDeleteReport, TableWriteReport
from amsrag.tables.table import Table


class PgAttached(PgCore):
    """Tables, themes and the query library, each saved all or nothing apart from the passages."""

    def tables(self) -> Any:
        """The index's tables (`PgTableStore`, schema amsrag_tables), or None while the database holds none
        (looked for again at most every TABLES_RECHECK_S seconds)."""
        from amsrag.store.postgres.tables import PgTableStore

        if self._tables is None:
            if time.monotonic() - self._tables_checked < TABLES_RECHECK_S:
                return None
            try:
                self._tables = PgTableStore.open(self.dsn)
            except IndexNotFoundError:
                self._tables_checked = time.monotonic()
                return None
        return self._tables

    def put_tables(self, tables: Sequence[Table], replace: bool = False) -> TableWriteReport:
        from amsrag.store.postgres.tables import PgTableStore

        if self._tables is None:
            self._tables = PgTableStore.open(self.dsn, create=True)
        report: TableWriteReport = self._tables.add(tables, replace=replace)
        return report

    def delete_tables(self, table_ids: Sequence[str]) -> TableDeleteReport:
        store = self.tables()
        if store is None:
            return TableDeleteReport(0, ())
        report: TableDeleteReport = store.delete(table_ids)
        return report

    def themes(self) -> Themes | None:
        """The corpus themes saved in meta (`themes`: the npz base64-encoded beside its card), re-read when
        another process saved newer ones (`themes_generation`)."""
        gen = int(self.read(lambda c: self.meta(c, "themes_generation")) or 0)
        cached = self._themes
        if cached is not None and cached[0] == gen:
            return cached[1]
        stored = self.read(lambda c: self.meta(c, "themes")) if gen else None
        themes = _themes_from_meta(stored) if stored else None
        self._themes = (gen, themes)
        return themes

    def save_themes(self, themes: Themes) -> None:
        value = _themes_to_meta(themes)
        with self._write() as conn:
            gen = int(self.meta(conn, "themes_generation") or 0) + 1
            conn.execute("INSERT INTO meta (key, value) VALUES ('themes', %s), ('themes_generation', %s) "
                         "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value", (Jsonb(value), Jsonb(gen)))
        self._themes = None

    def query_library(self) -> QueryLibrary:
        """The stored query library (empty when there is none); cached, and read again when another
        save (by any process) bumped its generation: one meta lookup per call otherwise."""
        cached = self._library
        if cached is not None and cached[0] == self.read(_library_generation):
            return cached[1]

        def load(c: psycopg.Connection) -> tuple[int, list[tuple[Any, ...]]]:
            with c.transaction():  # the generation and the rows from one snapshot
                c.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                gen = _library_generation(c)
                rows = c.execute("SELECT question, hop, source, vector FROM query_library ORDER BY pos").fetchall()
            return gen, rows

        gen, rows = self.read(load)
        library = QueryLibrary.empty() if not rows else QueryLibrary(
            [r[0] for r in rows], np.asarray([r[1] for r in rows]),
            np.stack([np.asarray(r[3], dtype=np.float32) for r in rows]), [r[2] for r in rows])
        self._library = (gen, library)
        return library

    def save_query_library(self, library: QueryLibrary) -> None:
        """Replace the stored library in one transaction (rows no longer in it deleted, changed rows
        updated, new rows inserted); passages and their tables are not touched."""
        if not isinstance(library, QueryLibrary):
            raise InputError(f"a QueryLibrary is needed, got {type(library).__name__}")
        if library.dim != DIMENSION:
            raise InputError(f"query library vectors have {library.dim} dimensions; the index's have {DIMENSION}")
        saved = library.copy()
        with self._write() as conn:
            conn.execute(f"CREATE TEMP TABLE query_library_new (key text, pos integer, question text, hop text, "
                         f"source text, vector vector({DIMENSION})) ON COMMIT DROP")
            with conn.cursor().copy("COPY query_library_new (key, pos, question, hop, source, vector) "
                                    "FROM STDIN WITH (FORMAT BINARY)") as copy:
                copy.set_types(["text", "int4", "text", "text", "text", "vector"])
                for pos, row in enumerate(zip(saved.keys, saved.questions, saved.hops, saved.sources,
                                              saved.vectors, strict=True)):
                    key, question, hop, source, vector = row
                    copy.write_row((key, pos, question, hop, source, vector))
            conn.execute("DELETE FROM query_library q WHERE NOT EXISTS "
                         "(SELECT 1 FROM query_library_new n WHERE n.key = q.key)")
            conn.execute("INSERT INTO query_library AS q (key, pos, question, hop, source, vector) "
                         "SELECT key, pos, question, hop, source, vector FROM query_library_new "
                         "ON CONFLICT (key) DO UPDATE SET pos = EXCLUDED.pos, question = EXCLUDED.question, "
                         "hop = EXCLUDED.hop, source = EXCLUDED.source, vector = EXCLUDED.vector, "
                         "added_at = CASE WHEN q.hop = EXCLUDED.hop THEN q.added_at ELSE now() END "
                         "WHERE (q.pos, q.question, q.hop, q.source, q.vector) IS DISTINCT FROM "
                         "(EXCLUDED.pos, EXCLUDED.question, EXCLUDED.hop, EXCLUDED.source, EXCLUDED.vector)")
            gen = _scalar(conn.execute(
                "INSERT INTO meta (key, value) VALUES ('query_library_generation', '1') ON CONFLICT (key) "
                "DO UPDATE SET value = to_jsonb((meta.value::text)::bigint + 1) RETURNING value"))
        self._library = (int(gen), saved)


def _themes_to_meta(themes: Themes) -> dict[str, str]:
    import base64
    import tempfile
    from pathlib import Path

    from amsrag.indexes.themes import ARRAYS_FILE, CARD_FILE

    with tempfile.TemporaryDirectory(prefix="amsrag-themes-") as tmp:
        themes.save(tmp)
        return {"card": (Path(tmp) / CARD_FILE).read_text(encoding="utf-8"),
                "npz": base64.b64encode((Path(tmp) / ARRAYS_FILE).read_bytes()).decode("ascii")}


def _themes_from_meta(value: dict[str, str]) -> Themes:
    import base64
    import tempfile
    from pathlib import Path

    from amsrag.indexes.themes import ARRAYS_FILE, CARD_FILE

    with tempfile.TemporaryDirectory(prefix="amsrag-themes-") as tmp:
        (Path(tmp) / CARD_FILE).write_text(value["card"], encoding="utf-8")
        (Path(tmp) / ARRAYS_FILE).write_bytes(base64.b64decode(value["npz"]))
        return Themes.load(tmp)


def _library_generation(conn: psycopg.Connection) -> int:
    row = conn.execute("SELECT value FROM meta WHERE key = 'query_library_generation'").fetchone()
    return 0 if row is None else int(row[0])
