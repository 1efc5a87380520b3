"""The embedded index's state every capability stands on: the directory, its manifest and passage table, the
passages' ids and titles by row, the encoder, filters and query-time settings."""

from __future__ import annotations

import errno
import os
import sqlite3
from pathlib import Path
from typing import Any, Self

from amsrag.config import AmsragConfig
from amsrag.embed.encoder import Encoder
from amsrag.embed.factory import encoder_for
from amsrag.errors import (
    IndexMismatchError,
    InputError,
)
from amsrag.filters import Where
from amsrag.indexes.allowed_rows import AllowedRows
from amsrag.indexes.bm25 import BM25Index
from amsrag.indexes.entity_graph import EntityGraph
from amsrag.indexes.themes import Themes
from amsrag.indexes.vectors import VectorIndex
from amsrag.store.embedded.sqlite import PassageTable
from amsrag.store.embedded.tables import TableStore
from amsrag.store.query_library import QueryLibrary
from amsrag.store.writes import (
    expected_params,
    param_differences,
    refusing_differences,
)

COMPONENTS = ("bm25", "dense", "graph")
DB_FILE = "passages.sqlite"
CONFIG_FILE = "config.toml"
LOCK_FILE = ".write.lock"
LOCK_TIMEOUT_S = 60.0
LOAD_ATTEMPTS = 5
ALLOWED_KEPT = 32  # resolved filters kept per index (each a sorted row array)
STAGE_TIMEOUT_S = 900.0  # staging waits for another writer's commit this long
LIBRARY_FILE = "query_library.npz"
LIBRARY_FORMAT = 1
TABLES_FILE = "tables.sqlite"  # the index's tables (amsrag.store.embedded.tables), created by the first table added
THEMES_DIR = "themes"  # the corpus themes of the global route (amsrag.themes), kept by amsrag.indexing.themes


def _is_storage_failure(exc: BaseException) -> bool:
    if isinstance(exc, sqlite3.OperationalError):
        return any(w in str(exc) for w in ("full", "disk I/O error"))
    assert isinstance(exc, OSError)
    # numpy reports a short write as OSError("N requested and M written") without an errno
    return exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EROFS, errno.EFBIG) or (
        exc.errno is None and "requested and" in str(exc))


def _missing_dirs(path: Path, manifest: dict[str, Any]) -> list[str]:
    return [f"{name} ({c['dir']})" for name, c in manifest.get("components", {}).items()
            if c.get("dir") and not (path / c["dir"]).is_dir()]


def _same_file(st: os.stat_result, other: Path) -> bool:
    try:
        o = other.stat()
    except OSError:
        return False
    return (st.st_ino, st.st_dev) == (o.st_ino, o.st_dev)


def _stamp_of(st: os.stat_result) -> tuple[int, int, int]:
    return st.st_ino, st.st_size, st.st_mtime_ns


def _stamp(path: Path) -> tuple[int, int, int] | None:
    """What tells one version of a file from the next (a save renames a new inode into place)."""
    try:
        return _stamp_of(os.stat(path))
    except FileNotFoundError:
        return None


def _check_params(path: Path, manifest: dict[str, Any], expected: dict[str, dict[str, Any]]) -> None:
    for name, params in expected.items():
        stored = manifest.get("components", {}).get(name, {}).get("params", {})
        diffs = refusing_differences(name, stored, params)
        if diffs:
            raise IndexMismatchError(
                f"index at {path} was built with different {name} settings than this installation provides "
                f"({'; '.join(diffs)}). It cannot be used as is: rebuild it with `amsrag index build`.")


class EmbeddedCore:
    """What every capability of `EmbeddedIndex` stands on: the directory, its manifest, the loaded generation."""

    backend = "embedded"

    def __init__(self, path: Path, config: AmsragConfig, manifest: dict[str, Any], table: PassageTable) -> None:
        self.path = path
        self.config = config
        self.manifest = manifest
        self.table = table
        self._encoder: Encoder | None = None
        self._bm25: BM25Index | None = None
        self._vectors: VectorIndex | None = None
        self._graph: EntityGraph | None = None
        self.built: dict[str, object] = {}  # what the layers above build over this generation (retrievers)
        self._allowed: dict[tuple[Any, tuple[int, int], Where], AllowedRows] = {}  # (generations, filter): rows
        self._info: dict[int, tuple[str, str]] = {}
        self._row_of: dict[str, int] = {}
        self._library: tuple[tuple[int, int, int] | None, QueryLibrary] | None = None  # (file stamp, library)
        self._locked = False  # this object holds the write lock (a refresh must not take it again)
        self._tables: TableStore | None = None
        self._themes: tuple[tuple[int, int, int] | None, Themes | None] | None = None  # (card stamp, themes)
        self._load_row_info()

    def close(self) -> None:
        if self._tables is not None:
            self._tables.close()
            self._tables = None
        self.table.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __len__(self) -> int:
        return len(self._info)

    @property
    def location(self) -> str:
        return str(self.path)

    @property
    def encoder(self) -> Encoder:
        if self._encoder is None:
            self._encoder = encoder_for(self.config.embedding)
        return self._encoder

    def allowed_rows(self, where: Where) -> AllowedRows:
        """The rows `where` allows, resolved from the passages' document keys and metadata and their
        documents' rows once per generation (of the passages and of the documents' metadata) and filter."""
        key = (self.manifest.get("generation"), self.table.generations(), where)
        found = self._allowed.get(key)
        if found is None:
            found = AllowedRows.resolve(where, self.table.row_facets())
            if len(self._allowed) >= ALLOWED_KEPT:
                self._allowed.clear()
            self._allowed[key] = found
        return found

    def update_config(self, config: AmsragConfig) -> None:
        """Replace query-time settings (router thresholds, fusion priors...) in the index's config.toml;
        settings the stored indexes depend on cannot change this way."""
        diffs = {n: param_differences(p, q) for (n, p), q in
                 zip(expected_params(self.config).items(), expected_params(config).values(), strict=True)}
        changed = [f"{n}: {'; '.join(d)}" for n, d in diffs.items() if d]
        if changed:
            raise InputError(f"these settings need a rebuild, not a config update: {' | '.join(changed)}")
        tmp = self.path / f".{CONFIG_FILE}.tmp"
        tmp.write_text(config.to_toml(), encoding="utf-8")
        os.replace(tmp, self.path / CONFIG_FILE)
        self.config = config
        self.built = {}

    def _load_row_info(self) -> None:
        self._info = {r: (pid, title) for r, pid, title in self.table.row_info()}
        self._row_of = {pid: r for r, (pid, _) in self._info.items()}

    def stored_rows(self) -> list[int]:
        """The internal rows of every stored passage, ascending."""
        return sorted(self._info)

