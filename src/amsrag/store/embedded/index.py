"""The embedded index: an index directory holding passages in SQLite and derived indexes beside it. `EmbeddedIndex`
composes the capabilities (`reads`, `writing`, `checks`, `attached`, over `publish` and `core`).

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

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from amsrag.config import AmsragConfig
from amsrag.errors import IndexCorruptError, IndexMismatchError, IndexNotFoundError, InputError
from amsrag.store.embedded.attached import EmbeddedAttached
from amsrag.store.embedded.checks import EmbeddedChecks
from amsrag.store.embedded.core import CONFIG_FILE, DB_FILE, LOAD_ATTEMPTS, _check_params, _missing_dirs
from amsrag.store.embedded.manifest import MANIFEST, read_manifest, write_json_atomic
from amsrag.store.embedded.reads import EmbeddedReads
from amsrag.store.embedded.sqlite import PassageTable
from amsrag.store.embedded.writing import EmbeddedWriting
from amsrag.store.writes import expected_params, with_legacy_tokenizer
from amsrag.version import INDEX_FORMAT_VERSION, __version__


class EmbeddedIndex(EmbeddedReads, EmbeddedWriting, EmbeddedChecks, EmbeddedAttached):
    """Passages + BM25 + vectors + entity graph in one directory. Use `create` or `open`."""

    @classmethod
    def create(cls, path: str | Path, config: AmsragConfig | None = None) -> EmbeddedIndex:
        path = Path(path)
        if (path / MANIFEST).exists():
            raise InputError(f"an index already exists at {path}: add passages with `amsrag index add` (it "
                             f"resumes an interrupted build), or choose another directory")
        if path.exists() and (not path.is_dir() or any(path.iterdir())):
            raise InputError(f"{path} exists and is not an empty directory; choose a new index directory")
        config = config or AmsragConfig()
        # before anything is written: an encoder whose package is missing (an extra) fails here, naming it
        components = {name: {"dir": None, "params": params, "n": 0} for name, params in expected_params(config).items()}
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
            "components": components,
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
