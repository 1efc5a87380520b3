"""What an embedded index keeps beside its passages: the query library, the tables of the structured route and
the corpus themes (`LibraryStorage`, `TableStorage`, `ThemeStorage`), each replaced apart from the passages."""

from __future__ import annotations

import os
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from amsrag.embed.encoder import DIMENSION
from amsrag.errors import IndexCorruptError, InputError
from amsrag.indexes.themes import CARD_FILE as THEMES_CARD
from amsrag.indexes.themes import Themes
from amsrag.store.embedded.core import (
    LIBRARY_FILE,
    LIBRARY_FORMAT,
    TABLES_FILE,
    THEMES_DIR,
    _stamp,
    _stamp_of,
)
from amsrag.store.embedded.manifest import write_atomic
from amsrag.store.embedded.publish import EmbeddedPublish
from amsrag.store.embedded.tables import TableStore
from amsrag.store.query_library import QueryLibrary
from amsrag.tables.catalog import TableDeleteReport, TableWriteReport
from amsrag.tables.table import Table


class EmbeddedAttached(EmbeddedPublish):
    """The query library, tables and themes of the index directory."""

    def query_library(self) -> QueryLibrary:
        """The stored query library (empty when there is none), read on first use and again whenever
        the file changed (another process saved one): one stat per call otherwise."""
        path = self.path / LIBRARY_FILE
        cached = self._library
        if cached is not None and cached[0] == _stamp(path):
            return cached[1]
        try:
            with open(path, "rb") as fh:
                stamp: tuple[int, int, int] | None = _stamp_of(os.fstat(fh.fileno()))
                library = _read_library(path, fh)
        except FileNotFoundError:
            stamp, library = None, QueryLibrary.empty()
        self._library = (stamp, library)
        return library

    def save_query_library(self, library: QueryLibrary) -> None:
        """Write the library to a temporary file beside the passages and rename it over the old one
        (under the write lock): readers see the old library or the new one, never a mix."""
        if not isinstance(library, QueryLibrary):
            raise InputError(f"a QueryLibrary is needed, got {type(library).__name__}")
        if library.dim != DIMENSION:
            raise InputError(f"query library vectors have {library.dim} dimensions; the index's have {DIMENSION}")
        saved = library.copy()
        path = self.path / LIBRARY_FILE
        with self._write_lock():
            for old in self.path.glob(f".{LIBRARY_FILE}.*.tmp"):  # left by a save that crashed
                old.unlink(missing_ok=True)
            arrays: dict[str, Any] = {"format": np.int64(LIBRARY_FORMAT), **saved.to_arrays()}
            write_atomic(path, lambda fh: np.savez(fh, **arrays))
            self._library = (_stamp(path), saved)

    def tables(self) -> TableStore | None:
        """The index's tables, or None while it holds none."""
        if self._tables is None:
            path = self.path / TABLES_FILE
            if not path.is_file():
                return None
            self._tables = TableStore.open(path)
        return self._tables

    def put_tables(self, tables: Sequence[Table], replace: bool = False) -> TableWriteReport:
        """Store `tables` in one transaction (all or nothing); a table id stored with other content is an
        error unless `replace`."""
        with self._write_lock():
            if self._tables is None:
                self._tables = TableStore.open(self.path / TABLES_FILE, create=True)
            return self._tables.add(tables, replace=replace)

    def delete_tables(self, table_ids: Sequence[str]) -> TableDeleteReport:
        with self._write_lock():
            tables = self.tables()
            if tables is None:
                return TableDeleteReport(0, ())
            return tables.delete(table_ids)

    def themes(self) -> Themes | None:
        """The stored corpus themes (None until `amsrag.indexing.themes` built them), re-read when another
        process saved new ones."""
        card = self.path / THEMES_DIR / THEMES_CARD
        cached = self._themes
        stamp = _stamp(card)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        themes = Themes.load(self.path / THEMES_DIR) if stamp is not None else None
        self._themes = (stamp, themes)
        return themes

    def save_themes(self, themes: Themes) -> None:
        with self._write_lock():
            themes.save(self.path / THEMES_DIR)
            self._themes = None


def _read_library(path: Path, fh: Any) -> QueryLibrary:
    try:
        with np.load(fh, allow_pickle=False) as data:
            arrays = {name: data[name] for name in data.files}
        version = int(arrays.pop("format", LIBRARY_FORMAT))
        if version != LIBRARY_FORMAT:
            raise ValueError(f"format {version}; this amsrag reads format {LIBRARY_FORMAT}")
        library = QueryLibrary.from_arrays(arrays)
        if library.dim != DIMENSION:
            raise ValueError(f"its vectors have {library.dim} dimensions, not {DIMENSION}")
    except (OSError, ValueError, KeyError, zipfile.BadZipFile, InputError) as exc:
        raise IndexCorruptError(f"{path}: the query library cannot be read ({exc}); restore it, or delete it "
                                f"and add the queries again with `amsrag train route learn`") from exc
    return library
