"""The health of an embedded index (`IndexHealth`): `check` verifies SQLite and every derived file against the
manifest, `repair` rebuilds damaged (or named) derived indexes from the stored passages and vectors."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from amsrag.embed.encoder import DIMENSION, passage_text_for_embedding
from amsrag.errors import IndexCorruptError
from amsrag.indexes.bm25 import BM25Index
from amsrag.indexes.entities import has_spaceless
from amsrag.indexes.entities_zh import is_mostly_han
from amsrag.indexes.entity_graph import EntityGraph
from amsrag.indexes.graph_parts import NerCache
from amsrag.indexes.vectors import VectorIndex
from amsrag.progress import NullProgress, Progress
from amsrag.store.embedded.core import COMPONENTS
from amsrag.store.embedded.manifest import read_manifest
from amsrag.store.embedded.publish import EmbeddedPublish, _sha256
from amsrag.store.health import CheckReport, RepairReport
from amsrag.store.writes import expected_params, zh_graph_problem
from amsrag.types import PassageRow


class EmbeddedChecks(EmbeddedPublish):
    """`check` and `repair`."""

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
