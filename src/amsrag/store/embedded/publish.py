"""The generations of an embedded index: the current one's derived indexes loaded together on first use, a change
published (the new generation staged beside the old one, the manifest replaced atomically, the old folders
removed; shared by writing and repair) under the cross-process write lock, and another process's generation
followed (`stale`, `refresh`, `sync`)."""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import shutil
import sqlite3
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from amsrag.embed.encoder import DIMENSION, passage_text_for_embedding
from amsrag.errors import (
    IndexBusyError,
    IndexCorruptError,
    StorageError,
)
from amsrag.indexes.bm25 import BM25Index
from amsrag.indexes.entity_graph import EntityGraph
from amsrag.indexes.vectors import VectorIndex
from amsrag.progress import NullProgress, Progress
from amsrag.store.embedded.core import (
    COMPONENTS,
    LIBRARY_FILE,
    LOAD_ATTEMPTS,
    LOCK_FILE,
    LOCK_TIMEOUT_S,
    EmbeddedCore,
    _is_storage_failure,
    _same_file,
)
from amsrag.store.embedded.manifest import MANIFEST, fsync_dir, read_manifest, write_json_atomic
from amsrag.store.embedded.sqlite import PassageTable
from amsrag.types import PassageRow, content_hash


class _NothingToDo(Exception):
    """Everything given is already stored: roll back the (generation-bumping) transaction."""


class EmbeddedPublish(EmbeddedCore):
    """Loading, staging, publishing and following generations of the derived indexes."""

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


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
