"""The embedded index: an index directory holding passages in SQLite and derived indexes beside it.

Layout of DIR:
    passages.sqlite        passages (WAL), the source of truth; also each document's fingerprint and
                           every passage vector by content hash (the dense index is rebuilt from them)
    config.toml            the configuration the index was built with
    manifest.json          format version, generation, and per component its directory and parameters
    bm25.gNNNNNN/          BM25 segments (term frequencies, memory-mapped; a segment unchanged since the
                           last generation is a hard link to its file there) and the collection statistics
    dense.gNNNNNN/         passage vectors (+ HNSW graph above `dense.hnsw_min_size`)
    graph.gNNNNNN/         entity graph
    query_library.npz      labelled queries and their vectors (written apart from passages, replaced atomically)

A change (add or delete) runs in one SQLite transaction; the new derived indexes are written to new
generation directories before the transaction commits, and the manifest, replaced atomically
afterwards, is what makes them current; it records each derived file's size and sha256, which
`check` verifies and `repair` restores from SQLite and the stored vectors. A crash at any point
leaves the old state readable; a crash between the commit and the manifest leaves derived indexes
behind the passages, which the next writer detects (generation numbers differ) and repairs without
re-embedding stored passages.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import shutil
import sqlite3
import time
import zipfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from amsrag.config import AmsragConfig
from amsrag.embed.encoder import DIMENSION, Encoder, passage_text_for_embedding
from amsrag.embed.factory import encoder_for
from amsrag.errors import (
    IndexBusyError,
    IndexCorruptError,
    IndexMismatchError,
    IndexNotFoundError,
    InputError,
    StorageError,
)
from amsrag.filters import Where
from amsrag.progress import NullProgress, Progress
from amsrag.retrieve.bm25 import BM25Index
from amsrag.retrieve.dense import VectorIndex
from amsrag.retrieve.entities import has_spaceless
from amsrag.retrieve.entities_zh import is_mostly_han
from amsrag.retrieve.filtered import AllowedRows
from amsrag.retrieve.graph import EntityGraph
from amsrag.retrieve.graph_parts import NerCache
from amsrag.store.documents import Document, DocumentInfo, DocumentMeta, PutReport, check_documents, plan_put
from amsrag.store.embedded.manifest import MANIFEST, fsync_dir, read_manifest, write_atomic, write_json_atomic
from amsrag.store.embedded.sqlite import PassageTable
from amsrag.store.health import CheckReport, RepairReport
from amsrag.store.query_library import QueryLibrary
from amsrag.store.writes import (
    DeleteReport,
    IngestReport,
    expected_params,
    ids_to_delete,
    param_differences,
    plan_insert,
    refusing_differences,
    validate_passages,
    with_legacy_tokenizer,
    zh_graph_problem,
)
from amsrag.structured.catalog import TableDeleteReport, TableWriteReport
from amsrag.structured.store import TableStore
from amsrag.structured.table import Table
from amsrag.themes.model import CARD_FILE as THEMES_CARD
from amsrag.themes.model import Themes
from amsrag.types import Passage, PassageRow, content_hash
from amsrag.version import INDEX_FORMAT_VERSION, __version__

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
TABLES_FILE = "tables.sqlite"  # the index's tables (amsrag.structured.store), created by the first table added
THEMES_DIR = "themes"  # the corpus themes of the global route (amsrag.themes), kept by amsrag.indexing.themes


class EmbeddedIndex:
    """Passages + BM25 + vectors + entity graph in one directory. Use `create` or `open`."""

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

    # ---------------------------------------------------------------- opening
    @classmethod
    def create(cls, path: str | Path, config: AmsragConfig | None = None) -> EmbeddedIndex:
        path = Path(path)
        if (path / MANIFEST).exists():
            raise InputError(f"an index already exists at {path}: add passages with `amsrag index add` (it "
                             f"resumes an interrupted build), or choose another directory")
        if path.exists() and (not path.is_dir() or any(path.iterdir())):
            raise InputError(f"{path} exists and is not an empty directory; choose a new index directory")
        config = config or AmsragConfig()
        path.mkdir(parents=True, exist_ok=True)
        config.save(path / CONFIG_FILE)
        table = PassageTable(path / DB_FILE)
        now = datetime.now(UTC).isoformat(timespec="seconds")
        manifest = {
            "format_version": INDEX_FORMAT_VERSION,
            "amsrag_version": __version__,
            "backend": "embedded",
            "generation": table.generation,
            "created": now,
            "updated": now,
            "components": {name: {"dir": None, "params": params, "n": 0}
                           for name, params in expected_params(config).items()},
        }
        write_json_atomic(path / MANIFEST, manifest)
        return cls(path, config, manifest, table)

    @classmethod
    def open(cls, path: str | Path, check: bool = True) -> EmbeddedIndex:
        """The index at `path`. With `check` (the default) a missing derived-index directory is an
        IndexCorruptError that names `amsrag index repair`; `repair` opens with check=False."""
        path = Path(path)
        if not path.is_dir():
            raise IndexNotFoundError(f"no index directory at {path}: build one with "
                                     f"`amsrag index build INPUT... --index {path}`")
        if not (path / MANIFEST).is_file() or not (path / DB_FILE).is_file():
            raise IndexNotFoundError(f"{path} is not an amsrag index (no {MANIFEST} or {DB_FILE})")
        manifest = read_manifest(path)
        if manifest.get("format_version") != INDEX_FORMAT_VERSION:
            raise IndexMismatchError(
                f"index at {path} has format version {manifest.get('format_version')!r}; this amsrag "
                f"({__version__}) reads version {INDEX_FORMAT_VERSION}. Rebuild it with `amsrag index build`.")
        config = with_legacy_tokenizer(AmsragConfig.load(path / CONFIG_FILE),
                                       manifest.get("components", {}).get("bm25", {}).get("params", {}))
        _check_params(path, manifest, expected_params(config))
        if check:
            missing = _missing_dirs(path, manifest)
            for _ in range(LOAD_ATTEMPTS):  # a writer may have published a newer generation meanwhile
                if not missing:
                    break
                newer = read_manifest(path)
                if newer.get("generation") == manifest.get("generation"):
                    break
                manifest, missing = newer, _missing_dirs(path, newer)
            if missing:
                raise IndexCorruptError(
                    f"index at {path}: derived index folder(s) missing: {', '.join(missing)}; rebuild them "
                    f"from the stored passages and vectors with `amsrag index repair --index {path}`")
        index = cls(path, config, manifest, PassageTable(path / DB_FILE))
        if index.table.schema_version < 2:
            index._migrate()
        if index.table.generation != manifest["generation"] and check:
            index.sync()
        return index

    def _migrate(self) -> None:
        """Schema 1 -> 2: copy the vectors of the dense index into SQLite (documents start unknown)."""
        with self._write_lock():
            if self.table.schema_version >= 2:
                return
            with self.table.transaction(bump=False) as conn:
                if self._component_dir("dense") is not None and len(self.vector_index.rows):
                    info = self.table.hashes_of_rows(conn, self.vector_index.rows.tolist())
                    rows = [r for r in self.vector_index.rows.tolist() if r in info]
                    self.table.put_vectors(conn, [info[r] for r in rows], self.vector_index.vectors_for_rows(rows))
                self.table.mark_migrated(conn)

    def close(self) -> None:
        if self._tables is not None:
            self._tables.close()
            self._tables = None
        self.table.close()

    def __enter__(self) -> EmbeddedIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __len__(self) -> int:
        return len(self._info)

    @property
    def location(self) -> str:
        return str(self.path)

    # ---------------------------------------------------------------- components
    @property
    def encoder(self) -> Encoder:
        if self._encoder is None:
            self._encoder = encoder_for(self.config.embedding)
        return self._encoder

    def _component_dir(self, name: str) -> Path | None:
        d = self.manifest["components"][name]["dir"]
        return None if d is None else self.path / d

    @property
    def bm25_index(self) -> BM25Index:
        if self._bm25 is None:
            self._load_components()
        assert self._bm25 is not None
        return self._bm25

    @property
    def vector_index(self) -> VectorIndex:
        if self._vectors is None:
            self._load_components()
        assert self._vectors is not None
        return self._vectors

    @property
    def entity_graph(self) -> EntityGraph:
        if self._graph is None:
            self._load_components()
        assert self._graph is not None
        return self._graph

    def _load_one(self, name: str) -> Any:
        d = self._component_dir(name)
        if name == "bm25":
            return BM25Index.empty(self.config.bm25) if d is None else BM25Index.load(d, self.config.bm25)
        if name == "dense":
            return (VectorIndex.empty(self.config.dense, DIMENSION) if d is None
                    else VectorIndex.load(d, self.config.dense, DIMENSION))
        return EntityGraph.build([], self.config.graph) if d is None else EntityGraph.load(d)

    def _load_components(self) -> None:
        """Load the three derived indexes of the manifest's generation together. A writer in another
        process may publish a newer generation and remove this one's folders meanwhile: then the newer
        manifest is read and loading starts again (a few times) before the index is called damaged."""
        for _ in range(LOAD_ATTEMPTS):
            try:
                bm25, vectors, graph = (self._load_one(n) for n in COMPONENTS)
            except (FileNotFoundError, IndexCorruptError) as exc:
                if read_manifest(self.path).get("generation") == self.manifest.get("generation"):
                    raise IndexCorruptError(f"index at {self.path}: a derived index cannot be read ({exc}); "
                                            f"rebuild it with `amsrag index repair --index {self.path}`") from exc
                self.refresh()
                continue
            self._bm25, self._vectors, self._graph = bm25, vectors, graph
            return
        raise IndexBusyError(f"index at {self.path}: writers published {LOAD_ATTEMPTS} generations while this "
                             f"process was loading one; try again")

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

    # ---------------------------------------------------------------- reading
    def describe_rows(self, rows: Sequence[int]) -> list[tuple[str, str]]:
        return [self._info[int(r)] for r in rows]

    def rows_for_ids(self, ids: Sequence[str]) -> dict[str, int]:
        """Internal rows of the given passage ids (unknown ids are left out)."""
        return {pid: self._row_of[pid] for pid in ids if pid in self._row_of}

    def passages_by_rows(self, rows: Sequence[int]) -> list[Passage]:
        found = self.table.passages_by_rows(rows)
        return [found[int(r)] for r in rows]

    def get(self, pid: str) -> Passage | None:
        return self.table.get(pid)

    def stored_rows(self) -> list[int]:
        """The internal rows of every stored passage, ascending."""
        return sorted(self._info)

    def iter_passages(self) -> Iterator[Passage]:
        rows = self.stored_rows()
        for start in range(0, len(rows), 1000):
            yield from self.passages_by_rows(rows[start : start + 1000])

    def vectors_for_rows(self, rows: Sequence[int]) -> np.ndarray:
        return self.vector_index.vectors_for_rows(rows)

    def stats(self) -> dict[str, Any]:
        comps = self.manifest["components"]
        vec = self.vector_index
        size = sum(f.stat().st_size for f in self.path.rglob("*") if f.is_file())
        return {
            "index": str(self.path),
            "backend": self.backend,
            "passages": len(self),
            "documents": self.table.count_documents(),
            "generation": self.manifest["generation"],
            "embedding_model": comps["dense"]["params"]["model_id"],
            "dense_search": vec.kind,
            "bm25": {"method": self.config.bm25.method, "vocabulary": self.bm25_index.n_terms,
                     "tokens": self.bm25_index.n_tokens, "segments": len(self.bm25_index.segments)},
            "graph": {"entities": self.entity_graph.n_entities, "edges": self.entity_graph.n_edges},
            "query_library": len(self.query_library()),
            "staged_vectors": self.table.embedding_counts()[1],
            "disk_bytes": size,
            "created": self.manifest["created"],
            "updated": self.manifest["updated"],
        }

    # ---------------------------------------------------------------- the query library
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

    # ---------------------------------------------------------------- tables and themes
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

    # ---------------------------------------------------------------- writing
    def add(self, passages: Iterable[Passage], progress: Progress | None = None,
            vectors: np.ndarray | None = None, doc_hashes: Mapping[str, tuple[str, str]] | None = None
            ) -> IngestReport:
        """Add passages in one transaction. Identical re-adds and duplicate content are skipped.

        `vectors`, if given, are the passages' embeddings by this index's model (no re-embedding),
        aligned with `passages`; otherwise vectors staged or stored for the same content are reused and
        only the rest is embedded. `doc_hashes` ({doc_id: (fingerprint, source)}) records documents
        this add completes; the fingerprint of any other document it adds to is forgotten.
        """
        progress = progress or NullProgress()
        items = validate_passages(list(passages))
        if vectors is not None and len(vectors) != len(items):
            raise InputError(f"{len(items)} passages but {len(vectors)} vectors")
        report = IngestReport(received=len(items))
        doc_hashes = dict(doc_hashes or {})
        with self._write_lock():
            try:
                with self.table.transaction() as conn:
                    new, report.skipped_existing, report.skipped_duplicate_content = plan_insert(
                        self.table, conn, items)
                    if not new:
                        raise _NothingToDo
                    rows = self.table.insert(conn, [items[i] for i in new])
                    added = [PassageRow(r, items[i][0].id, items[i][0].title, items[i][0].text)
                             for r, i in zip(rows, new, strict=True)]
                    given = None if vectors is None else np.asarray(vectors, dtype=np.float32)[new]
                    touched = {items[i][0].doc_id or items[i][0].id for i in new}
                    self.table.forget_documents(conn, touched - set(doc_hashes))
                    self._record(conn, doc_hashes)
                    staged = self._stage(conn, added, [], progress, report.seconds, given)
            except _NothingToDo:
                if doc_hashes:
                    with self.table.transaction(bump=False) as conn:
                        self._record(conn, doc_hashes)
                return report
            self._publish(staged, added, [])
        report.added = len(added)
        report.embedded = staged["embedded"]
        return report

    def put_documents(self, documents: Sequence[Document], progress: Progress | None = None,
                      delete: Sequence[str] = ()) -> PutReport:
        """Make each document hold exactly its given passages and delete the documents in `delete`, in
        one transaction: new documents are added, changed ones replaced (passages with the same id and
        content stay; vectors stored for the same content are reused, only new content is embedded)."""
        docs = check_documents(list(documents))
        delete = list(dict.fromkeys(delete))
        if not docs and not delete:
            raise InputError("no documents given to put or delete")
        validate_passages([p for d in docs for p in d.passages])  # plan_put derives the hashes per document
        progress = progress or NullProgress()
        report = PutReport(documents=len(docs))
        with self._write_lock():
            try:
                with self.table.transaction() as conn:
                    plan = plan_put(self.table, conn, docs, delete)
                    report.deleted_documents = len(delete)
                    report.kept, report.created = plan.kept, plan.created
                    report.skipped_duplicate_content = plan.skipped_duplicate_content
                    report.unchanged = len(plan.unchanged)
                    self._record(conn, {d.doc_id: (d.content_hash, d.source) for d in docs})
                    if not plan.removed_rows and not plan.insert:
                        raise _NothingToDo
                    self.table.delete_rows(conn, plan.removed_rows)
                    self.table.forget_documents(conn, delete)
                    rows = self.table.insert(conn, plan.insert)
                    added = [PassageRow(r, p.id, p.title, p.text) for r, (p, _) in zip(rows, plan.insert, strict=True)]
                    staged = self._stage(conn, added, plan.removed_rows, progress, report.seconds, None)
                    self.table.drop_vectors(conn, plan.removed_hashes)
            except _NothingToDo:
                with self.table.transaction(bump=False) as conn:
                    self._record(conn, {d.doc_id: (d.content_hash, d.source) for d in docs})
                return report
            self._publish(staged, added, plan.removed_rows)
        report.added, report.removed = len(added), len(plan.removed_rows)
        report.embedded = staged["embedded"]
        report.reused_vectors = len(added) - staged["embedded"]
        return report

    def delete_documents(self, doc_ids: Sequence[str], progress: Progress | None = None) -> DeleteReport:
        """Delete whole documents in one transaction; an unknown doc_id is an error and nothing is deleted."""
        doc_ids = ids_to_delete(doc_ids, "document")
        report = DeleteReport()
        with self._write_lock():
            with self.table.transaction() as conn:
                found = self.table.document_rows(conn, doc_ids)
                missing = sorted(set(doc_ids) - {d for _, _, d, _ in found})
                if missing:
                    shown = ", ".join(missing[:10]) + (" ..." if len(missing) > 10 else "")
                    raise InputError(f"{len(missing)} document(s) not in the index {self.path}: {shown}; "
                                     f"nothing was deleted")
                removed = sorted(r for r, _, _, _ in found)
                self.table.delete_rows(conn, removed)
                self.table.drop_vectors(conn, {h for _, _, _, h in found})
                self.table.forget_documents(conn, doc_ids)
                staged = self._stage(conn, [], removed, progress or NullProgress(), report.seconds, None)
            self._publish(staged, [], removed)
        report.deleted = len(removed)
        report.documents = len(doc_ids)
        return report

    def delete(self, ids: Sequence[str], progress: Progress | None = None) -> DeleteReport:
        """Delete passages by id in one transaction; unknown ids are an error and nothing is deleted."""
        ids = ids_to_delete(ids, "passage")
        report = DeleteReport()
        with self._write_lock():
            with self.table.transaction() as conn:
                found = self.table.rows_for_ids(conn, ids)
                missing = [i for i in ids if i not in found]
                if missing:
                    shown = ", ".join(missing[:10]) + (" ..." if len(missing) > 10 else "")
                    raise InputError(
                        f"{len(missing)} id(s) not in the index {self.path}: {shown}; nothing was deleted")
                removed = sorted(found.values())
                hashes = self.table.hashes_of_rows(conn, removed)
                changed = self.table.doc_ids_of_rows(conn, removed)
                self.table.delete_rows(conn, removed)
                self.table.forget_documents(conn, changed)
                self.table.drop_vectors(conn, hashes.values())
                staged = self._stage(conn, [], removed, progress or NullProgress(), report.seconds, None)
            self._publish(staged, [], removed)
        report.deleted = len(removed)
        return report

    def documents(self, prefix: str | None = None) -> dict[str, DocumentInfo]:
        """Every stored document (those whose doc_id starts with `prefix`, when given)."""
        return {d: DocumentInfo(d, n, h, src, title, modified, size, tuple(json.loads(tags or "[]")))
                for d, n, h, src, title, modified, size, tags in self.table.documents(prefix)}

    def put_document_meta(self, metas: Mapping[str, DocumentMeta]) -> int:
        """Rewrite the rows of stored documents with their title, modification time, size and tags (their
        passages untouched; the derived indexes stay at their generation); how many were written."""
        if not metas:
            return 0
        with self._write_lock(), self.table.transaction(bump=False) as conn:
            return self.table.put_document_meta(conn, metas, datetime.now(UTC).isoformat(timespec="seconds"))

    def unembedded(self, hashes: Sequence[str]) -> list[str]:
        """The content hashes among `hashes` with no stored or staged vector (each once, in order)."""
        have = set(self.table.vectors_by_hash(hashes, DIMENSION))
        return [h for h in dict.fromkeys(hashes) if h not in have]

    def count_staged(self, hashes: Sequence[str]) -> int:
        """How many of `hashes` have a staged vector but no stored passage (an interrupted ingest's work)."""
        return self.table.count_staged(hashes)

    def stage_vectors(self, hashes: Sequence[str], vectors: np.ndarray) -> None:
        """Commit vectors for content not stored yet (an ingest's progress, kept if it is killed)."""
        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.shape != (len(hashes), DIMENSION):
            raise InputError(f"{len(hashes)} hashes need a ({len(hashes)}, {DIMENSION}) array, got {vectors.shape}")
        deadline = time.monotonic() + STAGE_TIMEOUT_S
        while True:
            try:
                with self._storage_errors(), self.table.transaction(bump=False) as conn:
                    self.table.put_vectors(conn, list(hashes), vectors)
                return
            except sqlite3.OperationalError as exc:
                # another process's commit holds SQLite's write lock (BM25 + NER of a batch can take minutes)
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise IndexBusyError(f"index {self.path}: could not stage vectors for {STAGE_TIMEOUT_S:.0f} s "
                                         f"({exc}); another process is writing") from exc
                time.sleep(0.5)

    def sync(self, progress: Progress | None = None) -> int:
        """Bring derived indexes in line with the passages table (after an interrupted write)."""
        with self._write_lock():
            if self.table.generation == self.manifest["generation"]:
                return 0
            with self.table.transaction() as conn:
                stored = {r.row: r for r in self.table.iter_rows()}
                indexed = set(self.bm25_index.rows.tolist())
                added = [stored[r] for r in sorted(set(stored) - indexed)]
                removed = sorted(indexed - set(stored))
                staged = self._stage(conn, added, removed, progress or NullProgress(), {}, None)
            self._publish(staged, added, removed)
        return len(added) + len(removed)

    def _record(self, conn, doc_hashes: Mapping[str, tuple[str, str]]) -> None:
        if doc_hashes:
            now = datetime.now(UTC).isoformat(timespec="seconds")
            self.table.record_documents(conn, [(d, h, src) for d, (h, src) in doc_hashes.items()], now)

    # ---------------------------------------------------------------- checking and repair
    def check(self, progress: Progress | None = None) -> CheckReport:
        """Verify SQLite, the manifest and every derived index: files present with their recorded size
        and sha256, the same passage rows everywhere, unit-norm finite vectors, a stored vector for
        every passage. Reads only; `repair` fixes what it reports as repairable."""
        report = CheckReport(self.location)
        progress = progress or NullProgress()
        report.checked.append("sqlite integrity")
        for line in self.table.integrity()[:10]:
            report.problem(f"SQLite: {line} (the passages database is damaged: restore it from a backup)")
        report.checked.append("manifest")
        try:
            on_disk = read_manifest(self.path)
        except IndexCorruptError as exc:
            report.problem(str(exc), "manifest")
            on_disk = self.manifest
        if on_disk.get("generation") != self.table.generation:
            report.problem(f"derived indexes are at generation {on_disk.get('generation')}, the passages at "
                           f"{self.table.generation} (an interrupted write)", "all")
        rows = np.asarray(self.stored_rows(), dtype=np.int64)
        with progress.task("check: derived indexes", len(COMPONENTS)) as adv:
            for name in COMPONENTS:
                self._check_component(name, on_disk["components"].get(name, {}), rows, report)
                adv(1)
        zh = self._zh_graph_problem(on_disk)
        if zh is not None:
            report.problem(zh, "graph")
        report.checked.append("stored vectors")
        with_vector, staged = self.table.embedding_counts()
        if with_vector != len(rows):
            report.problem(f"{len(rows) - with_vector} passage(s) have no stored vector in SQLite (repair embeds them)",
                           "vectors")
        report.checked.append(f"{len(rows)} passages, {staged} staged vector(s)")
        return report

    def _zh_graph_problem(self, manifest: dict[str, Any]) -> str | None:
        rows = self.table.iter_rows
        return zh_graph_problem(manifest["components"].get("graph", {}).get("params", {}),
                                expected_params(self.config)["graph"],
                                lambda: sum(has_spaceless(r.title) or has_spaceless(r.text) for r in rows()))

    def _reusable_ner(self, found: CheckReport, stored: list[PassageRow]) -> NerCache:
        """The NER results a graph rebuild keeps: none when the graph may be damaged, but when its only problem
        is its Chinese entity settings, those of the passages spaCy reads either way (not mostly Han)."""
        zh = self._zh_graph_problem(self.manifest)
        if zh is None or [p for p in found.problems if p.startswith("graph:")] != [zh] or \
                {"all", "manifest"} & set(found.repairable):
            return {}
        directory = self._component_dir("graph")
        if directory is None:
            return {}
        ner = EntityGraph.load(directory).ner
        return {r.row: ner[r.row] for r in stored if r.row in ner and not is_mostly_han(r.text)}

    def _check_component(self, name: str, comp: dict[str, Any], rows: np.ndarray, report: CheckReport) -> None:
        report.checked.append(name)
        d = comp.get("dir")
        if d is None:
            if len(rows):
                report.problem(f"{name}: no derived index for {len(rows)} passages", name)
            return
        directory = self.path / d
        if not directory.is_dir():
            report.problem(f"{name}: folder {d} is missing", name)
            return
        for fname, (size, digest) in comp.get("files", {}).items():
            f = directory / fname
            if not f.is_file():
                report.problem(f"{name}: {d}/{fname} is missing", name)
            elif f.stat().st_size != size or _sha256(f) != digest:
                report.problem(f"{name}: {d}/{fname} does not match its recorded checksum", name)
        if name in report.repairable:
            return
        try:
            if name == "bm25":
                got = BM25Index.load(directory, self.config.bm25).rows
            elif name == "dense":
                vec = VectorIndex.load(directory, self.config.dense, DIMENSION)
                got = vec.rows
                norms = np.linalg.norm(np.asarray(vec.vectors, dtype=np.float32), axis=1) if len(got) else np.ones(0)
                bad = int(np.sum(~np.isfinite(norms) | (np.abs(norms - 1.0) > 1e-3)))
                if bad:
                    report.problem(f"dense: {bad} vector(s) are not unit-norm or not finite", name)
            else:
                got = np.asarray(sorted(EntityGraph.load(directory).ner), dtype=np.int64)
        except Exception as exc:
            report.problem(f"{name}: {d} cannot be read ({type(exc).__name__}: {exc})", name)
            return
        got = np.sort(np.asarray(got, dtype=np.int64))
        if len(got) != len(rows) or not np.array_equal(got, rows):
            report.problem(f"{name}: indexes {len(got)} passage rows, SQLite holds {len(rows)}"
                           f"{'' if len(got) != len(rows) else ' (different rows)'}", name)

    def repair(self, components: Sequence[str] | None = None, progress: Progress | None = None) -> RepairReport:
        """Rebuild derived indexes from SQLite: those `check` finds damaged (or the given `components`).
        BM25 is re-tokenised, the dense index rebuilt from the stored vectors (only passages without one
        are embedded), the graph rebuilt with NER run again (only when the graph is lost or damaged)."""
        t0 = time.perf_counter()
        progress = progress or NullProgress()
        report = RepairReport(self.location)
        if self.table.generation != self.manifest["generation"] and all(
                d is None or d.is_dir() for d in map(self._component_dir, COMPONENTS)):
            self.sync(progress)  # an interrupted write: catch the derived indexes up, no rebuild
        with self._write_lock():
            found = self.check(progress)
            todo = set(components or ())
            if not components:
                todo = set(found.repairable)
                if "all" in todo or "manifest" in todo:
                    todo |= set(COMPONENTS)
            todo = {c for c in todo if c in (*COMPONENTS, "vectors")}
            if not todo:
                return report
            with self.table.transaction() as conn:
                stored = list(self.table.iter_rows())
                hashes = dict(self.table.row_hashes())
                vectors = self.table.vectors_by_hash(list(hashes.values()), DIMENSION)
                lacking = [r for r in stored if hashes[r.row] not in vectors]
                if lacking:
                    with progress.task("repair: embed passages without a stored vector", len(lacking)) as adv:
                        fresh = self.encoder.encode([passage_text_for_embedding(r.title, r.text) for r in lacking], adv)
                    self.table.put_vectors(conn, [hashes[r.row] for r in lacking], fresh)
                    vectors.update({hashes[r.row]: fresh[i] for i, r in enumerate(lacking)})
                    report.reembedded = len(lacking)
                    todo.add("dense")
                todo.discard("vectors")
                gen = int(conn.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()[0])
                comps: dict[str, Any] = {}
                for name in COMPONENTS:
                    if name not in todo:
                        comps[name] = self._load_one(name)
                        continue
                    with progress.task(f"repair: {name}", len(stored)) as adv:
                        if name == "bm25":
                            comps[name] = BM25Index.empty(self.config.bm25).updated(stored, [], adv)
                        elif name == "dense":
                            mat = (np.stack([vectors[hashes[r.row]] for r in stored]) if stored
                                   else np.zeros((0, DIMENSION), np.float32))
                            comps[name] = VectorIndex.empty(self.config.dense, DIMENSION).updated(
                                [r.row for r in stored], mat, [])
                            adv(len(stored))
                        else:
                            comps[name] = EntityGraph.build(stored, self.config.graph, adv,
                                                            reuse=self._reusable_ner(found, stored))
                self._remove_orphans()
                written = {name: self._write_component(name, gen, comp, reuse=name not in todo)
                           for name, comp in comps.items()}
                expected = expected_params(self.config)
                staged = {"generation": gen, "written": written, "embedded": report.reembedded, **comps,
                          "params": {name: expected[name] for name in todo if name in COMPONENTS}}
            self._publish(staged, [], [], reload=True)
            report.rebuilt = sorted(todo)
        report.seconds = time.perf_counter() - t0
        return report

    def stale(self) -> bool:
        """True when another process published a write (a newer manifest) since this one loaded it, or
        committed one to SQLite that its manifest does not show yet."""
        generation = self.manifest.get("generation")
        return read_manifest(self.path).get("generation") != generation or self.table.generation != generation

    def refresh(self) -> bool:
        """Pick up a write another process published since this one loaded the manifest; True when
        there was one. The passage rows (read from SQLite) and the derived indexes (named by the
        manifest) must describe the same generation: when SQLite is ahead — a writer between its
        commit and its manifest, or one that died there — this waits for that writer's lock and
        completes the write if it was left unfinished."""
        changed = False
        on_disk = read_manifest(self.path)
        if on_disk.get("generation") != self.manifest.get("generation"):
            self._reload(on_disk)
            changed = True
        if not self._locked and self.table.generation != self.manifest.get("generation"):
            self.sync()
            changed = True
        return changed

    def _reload(self, manifest: dict[str, Any]) -> None:
        self.manifest = manifest
        self._bm25 = self._vectors = self._graph = None
        self.built = {}
        self._load_row_info()

    def _load_row_info(self) -> None:
        self._info = {r: (pid, title) for r, pid, title in self.table.row_info()}
        self._row_of = {pid: r for r, (pid, _) in self._info.items()}

    def _stage(self, conn, added: list[PassageRow], removed: list[int], progress: Progress,
               seconds: dict[str, float], vectors: np.ndarray | None) -> dict[str, Any]:
        """Compute and write the next generation of every derived index (inside the transaction).
        Vectors: the given ones, else those stored for the same content, else embedded now; either
        way they are stored in SQLite with the passages."""
        gen = int(conn.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()[0])
        self._remove_orphans()
        t = time.perf_counter()
        with progress.task("bm25: tokenise", len(added)) as adv:
            bm25 = self.bm25_index.updated(added, removed, adv)
        seconds["bm25"] = time.perf_counter() - t
        t = time.perf_counter()
        hashes = [content_hash(p.title, p.text) for p in added]
        embedded = 0
        if vectors is None:
            known = self.table.vectors_by_hash(hashes, DIMENSION)
            todo = [i for i, h in enumerate(hashes) if h not in known]
            fresh = np.zeros((0, DIMENSION), np.float32)
            if todo:
                with progress.task("dense: embed", len(todo)) as adv:
                    fresh = self.encoder.encode([passage_text_for_embedding(added[i].title, added[i].text)
                                                 for i in todo], adv)
            embedded = len(todo)
            known.update({hashes[i]: fresh[j] for j, i in enumerate(todo)})
            vectors = (np.stack([known[h] for h in hashes]) if hashes
                       else np.zeros((0, DIMENSION), np.float32))
        self.table.put_vectors(conn, hashes, vectors)
        seconds["embed"] = time.perf_counter() - t
        t = time.perf_counter()
        vec = self.vector_index.updated([p.row for p in added], vectors, removed)
        seconds["vectors"] = time.perf_counter() - t
        t = time.perf_counter()
        with progress.task("graph: entities", len(added)) as adv:
            graph = self.entity_graph.update(added, removed, lambda: self.table.iter_rows(), adv,
                                             source=_StoredPassages(self.table, bm25))
        seconds["graph"] = time.perf_counter() - t
        t = time.perf_counter()
        written = {}
        for name, comp in (("bm25", bm25), ("dense", vec), ("graph", graph)):
            written[name] = self._write_component(name, gen, comp)
        seconds["write"] = time.perf_counter() - t
        return {"generation": gen, "written": written, "bm25": bm25, "dense": vec, "graph": graph,
                "embedded": embedded}

    def _write_component(self, name: str, gen: int, comp: Any,
                         reuse: bool = True) -> tuple[str, dict[str, tuple[int, str]]]:
        """Save `comp` as generation `gen`: its directory name and {file: (size, sha256)}."""
        final = self.path / f"{name}.g{gen:06d}"
        tmp = self.path / f"{name}.g{gen:06d}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(final, ignore_errors=True)  # left by a write that never reached the manifest
        tmp.mkdir()
        previous = self._component_dir(name) if reuse else None  # repair never links a file it may distrust
        recorded = self.manifest["components"][name].get("files", {}) if previous is not None else {}
        try:
            if isinstance(comp, (BM25Index, VectorIndex)):
                comp.save(tmp, previous=previous)  # unchanged parts are hard-linked, not rewritten
            else:
                comp.save(tmp)
            files = {}
            for f in sorted(tmp.iterdir()):
                st = f.stat()
                if previous is not None and f.name in recorded and _same_file(st, previous / f.name):
                    size, digest = recorded[f.name]
                    files[f.name] = (int(size), str(digest))  # a link to a file already checked and synced
                    continue
                with open(f, "rb") as fh:
                    os.fsync(fh.fileno())
                files[f.name] = (st.st_size, _sha256(f))
            os.rename(tmp, final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return final.name, files

    def _publish(self, staged: dict[str, Any], added: list[PassageRow], removed: list[int],
                 reload: bool = False) -> None:
        old_dirs = [self._component_dir(n) for n in COMPONENTS]
        written = staged["written"]
        manifest = dict(self.manifest)
        manifest["generation"] = staged["generation"]
        manifest["updated"] = datetime.now(UTC).isoformat(timespec="seconds")
        manifest["components"] = {
            name: {**self.manifest["components"][name], "dir": written[name][0], "files": written[name][1],
                   "n": len(staged["bm25"].rows),
                   **({"params": staged["params"][name]} if name in staged.get("params", {}) else {})}
            for name in COMPONENTS
        }
        write_json_atomic(self.path / MANIFEST, manifest)
        self.manifest = manifest
        self._bm25, self._vectors, self._graph = staged["bm25"], staged["dense"], staged["graph"]
        staged["dense"].map_base(self.path / written["dense"][0])
        self.built = {}
        for r in removed:
            gone = self._info.pop(r, None)  # absent when the row info was read after the commit (sync at open)
            if gone is not None:
                self._row_of.pop(gone[0], None)
        for p in added:
            self._info[p.row] = (p.id, p.title)
            self._row_of[p.id] = p.row
        if reload:
            self._load_row_info()
        new_dirs = {w[0] for w in written.values()}
        for d in old_dirs:
            if d is not None and d.name not in new_dirs:
                shutil.rmtree(d, ignore_errors=True)

    def _remove_orphans(self) -> None:
        """Derived-index folders no manifest names and temporary files of atomic writes that never
        finished (under the write lock: no other writer is mid-write)."""
        current = {c["dir"] for c in self.manifest["components"].values()}
        for d in self.path.iterdir():
            if d.is_dir() and d.name.split(".g")[0] in COMPONENTS and d.name not in current:
                shutil.rmtree(d, ignore_errors=True)
            elif d.is_file() and d.name.startswith((f".{MANIFEST}.", f".{LIBRARY_FILE}.")) and d.name.endswith(".tmp"):
                d.unlink(missing_ok=True)

    @contextmanager
    def _write_lock(self) -> Iterator[None]:
        fd = os.open(self.path / LOCK_FILE, os.O_CREAT | os.O_RDWR, 0o644)
        try:
            deadline = time.monotonic() + LOCK_TIMEOUT_S
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise IndexBusyError(f"index {self.path} is being written by another process; "
                                             f"gave up after {LOCK_TIMEOUT_S:.0f} s") from None
                    time.sleep(0.1)
            self._locked = True
            self.refresh()
            with self._storage_errors(cleanup=True):
                yield
        finally:
            self._locked = False
            os.close(fd)
        fsync_dir(self.path)

    @contextmanager
    def _storage_errors(self, cleanup: bool = False) -> Iterator[None]:
        """A full or failing disk as a StorageError (the SQLite transaction has rolled back by then);
        with `cleanup`, the folders and temporary files the failed write left are removed."""
        try:
            yield
        except (OSError, sqlite3.OperationalError) as exc:
            if not _is_storage_failure(exc):
                raise
            if cleanup:
                with suppress(OSError):
                    self._remove_orphans()
            full = "full" in str(exc) or getattr(exc, "errno", None) in (errno.ENOSPC, errno.EDQUOT) or (
                isinstance(exc, OSError) and exc.errno is None)
            raise StorageError(
                f"index {self.path}: writing failed ({type(exc).__name__}: {exc})"
                + ("; the disk is full" if full else "")
                + ". The index keeps its last committed state (a change committed just before the failure is "
                  "completed when the index is next opened); free space and run the command again") from exc


def _is_storage_failure(exc: BaseException) -> bool:
    if isinstance(exc, sqlite3.OperationalError):
        return any(w in str(exc) for w in ("full", "disk I/O error"))
    assert isinstance(exc, OSError)
    # numpy reports a short write as OSError("N requested and M written") without an errno
    return exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EROFS, errno.EFBIG) or (
        exc.errno is None and "requested and" in str(exc))


class _StoredPassages:
    """What an entity-graph update reads back: stored passages by row, and the staged BM25 postings
    as the prefilter for passages that may mention a new title."""

    def __init__(self, table: PassageTable, bm25: BM25Index) -> None:
        self.table = table
        self.bm25 = bm25

    def rows(self, numbers: Sequence[int]) -> list[PassageRow]:
        return list(self.table.iter_rows(numbers))

    def containing(self, surface: str) -> np.ndarray | None:
        return self.bm25.rows_with_words(surface)


class _NothingToDo(Exception):
    """Everything given is already stored: roll back the (generation-bumping) transaction."""


def _missing_dirs(path: Path, manifest: dict[str, Any]) -> list[str]:
    return [f"{name} ({c['dir']})" for name, c in manifest.get("components", {}).items()
            if c.get("dir") and not (path / c["dir"]).is_dir()]


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


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


def _check_params(path: Path, manifest: dict[str, Any], expected: dict[str, dict[str, Any]]) -> None:
    for name, params in expected.items():
        stored = manifest.get("components", {}).get(name, {}).get("params", {})
        diffs = refusing_differences(name, stored, params)
        if diffs:
            raise IndexMismatchError(
                f"index at {path} was built with different {name} settings than this installation provides "
                f"({'; '.join(diffs)}). It cannot be used as is: rebuild it with `amsrag index build`.")
