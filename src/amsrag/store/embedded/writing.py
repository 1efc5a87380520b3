"""Writing an embedded index (`PassageWriter`): passages, documents and their metadata, staged vectors; each
change one SQLite transaction and one published generation."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime

import numpy as np

from amsrag.embed.encoder import DIMENSION
from amsrag.errors import IndexBusyError, InputError
from amsrag.progress import NullProgress, Progress
from amsrag.store.documents import Document, DocumentInfo, DocumentMeta, PutReport, check_documents, plan_put
from amsrag.store.embedded.core import STAGE_TIMEOUT_S
from amsrag.store.embedded.publish import EmbeddedPublish, _NothingToDo
from amsrag.store.writes import DeleteReport, IngestReport, ids_to_delete, plan_insert, validate_passages
from amsrag.types import Passage, PassageRow


class EmbeddedWriting(EmbeddedPublish):
    """Adds, document puts and deletes, staging (`PassageWriter`)."""

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

    def _record(self, conn, doc_hashes: Mapping[str, tuple[str, str]]) -> None:
        if doc_hashes:
            now = datetime.now(UTC).isoformat(timespec="seconds")
            self.table.record_documents(conn, [(d, h, src) for d, (h, src) in doc_hashes.items()], now)
