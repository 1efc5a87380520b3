"""Writing a PostgreSQL index (`PassageWriter`): passages, documents and their metadata, staged vectors; each
change one transaction under the cross-process lock."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import psycopg
from psycopg.types.json import Jsonb

from amsrag.embed.encoder import DIMENSION
from amsrag.errors import InputError
from amsrag.progress import NullProgress, Progress
from amsrag.store.documents import Document, DocumentInfo, DocumentMeta, PutReport, check_documents, plan_put
from amsrag.store.postgres import bm25_blobs
from amsrag.store.postgres.bm25_blobs import BM25State
from amsrag.store.postgres.core import _UTC_STAMP, BULK_REBUILD_SHARE, HNSW_INDEX, LOOKUP_CHUNK, _scalar
from amsrag.store.postgres.derived import PgDerived, _Change
from amsrag.store.writes import DeleteReport, IngestReport, ids_to_delete, plan_insert, validate_passages
from amsrag.types import Passage


class _Stored:
    """What `plan_insert` and `plan_put` ask the passage table, answered by PostgreSQL."""

    @staticmethod
    def existing(conn: psycopg.Connection, ids: Sequence[str], hashes: Sequence[str]
                 ) -> tuple[dict[str, str], dict[str, str]]:
        by_id: dict[str, str] = dict(conn.execute("SELECT id, content_hash FROM passages WHERE id = ANY(%s)",
                                                  (list(ids),)).fetchall())
        by_hash: dict[str, str] = dict(conn.execute(
            "SELECT content_hash, id FROM passages WHERE content_hash = ANY(%s)", (list(hashes),)).fetchall())
        return by_id, by_hash

    @staticmethod
    def document_rows(conn: psycopg.Connection, doc_ids: Sequence[str]) -> list[tuple[int, str, str, str]]:
        """(row, passage id, doc_id, content hash) of every stored passage of the given documents."""
        return [(int(r), i, d, h) for r, i, d, h in conn.execute(
            "SELECT prow, id, doc_id, content_hash FROM passages WHERE doc_id = ANY(%s) ORDER BY prow",
            (list(doc_ids),)).fetchall()]


def _record_documents(conn: psycopg.Connection, doc_hashes: Mapping[str, tuple[str, str]]) -> None:
    """Record (fingerprint, source) of documents written in full."""
    if doc_hashes:
        ids = list(doc_hashes)
        conn.execute("INSERT INTO documents (doc_id, content_hash, source) "
                     "SELECT * FROM unnest(%s::text[], %s::text[], %s::text[]) ON CONFLICT (doc_id) DO UPDATE "
                     "SET content_hash = EXCLUDED.content_hash, source = EXCLUDED.source, updated = now()",
                     (ids, [doc_hashes[d][0] for d in ids], [doc_hashes[d][1] for d in ids]))


def _forget_documents(conn: psycopg.Connection, doc_ids: Iterable[str]) -> None:
    """Drop the recorded fingerprint of documents changed passage by passage (their title, time and tags
    stay); a document without passages left (call this after deleting them) loses its row."""
    ids = list(doc_ids)
    if ids:
        conn.execute("DELETE FROM documents d WHERE d.doc_id = ANY(%s) AND NOT EXISTS "
                     "(SELECT 1 FROM passages p WHERE p.doc_id = d.doc_id)", (ids,))
        conn.execute("UPDATE documents SET content_hash = '' WHERE doc_id = ANY(%s)", (ids,))


def _put_document_meta(conn: psycopg.Connection, metas: Mapping[str, DocumentMeta]) -> int:
    """Write the metadata of the stored documents among `metas` (a row made for one that has none) and count
    the documents' metadata generation up; how many documents were written."""
    ids = list(metas)
    cur = conn.execute(
        "INSERT INTO documents (doc_id, content_hash, source, title, modified, size, tags) "
        "SELECT m.doc_id, '', '', m.title, m.modified::timestamptz, m.size, "
        "ARRAY(SELECT jsonb_array_elements_text(m.tags)) "
        "FROM unnest(%s::text[], %s::text[], %s::text[], %s::bigint[], %s::jsonb[]) "
        "AS m(doc_id, title, modified, size, tags) "
        "WHERE EXISTS (SELECT 1 FROM passages p WHERE p.doc_id = m.doc_id) "
        "ON CONFLICT (doc_id) DO UPDATE SET title = EXCLUDED.title, modified = EXCLUDED.modified, "
        "size = EXCLUDED.size, tags = EXCLUDED.tags",
        (ids, [metas[d].title for d in ids], [metas[d].modified for d in ids], [metas[d].size for d in ids],
         [Jsonb(list(metas[d].tags)) for d in ids]))
    conn.execute("UPDATE meta SET value = to_jsonb((value #>> '{}')::bigint + 1) WHERE key = 'documents_generation'")
    return cur.rowcount


class PgWriting(PgDerived):
    """Adds, document puts and deletes, staging (`PassageWriter`)."""

    def add(self, passages: Iterable[Passage], progress: Progress | None = None,
            vectors: np.ndarray | None = None, doc_hashes: Mapping[str, tuple[str, str]] | None = None,
            ner: dict[str, tuple[str, ...]] | None = None) -> IngestReport:
        """Add passages in one transaction. Identical re-adds and duplicate content are skipped.

        `vectors`: the passages' embeddings by this index's model, aligned with `passages` (no
        re-embedding); without them, vectors staged for the same content are reused and only the rest
        is embedded. `doc_hashes` ({doc_id: (fingerprint, source)}) records the documents this add
        completes; the fingerprint of any other document it adds to is forgotten. `ner`: NER surfaces
        per passage id already computed by the same spaCy model (an export from the embedded store
        passes them so spaCy does not run again).
        """
        progress = progress or NullProgress()
        items = validate_passages(list(passages))
        if vectors is not None and len(vectors) != len(items):
            raise InputError(f"{len(items)} passages but {len(vectors)} vectors")
        report = IngestReport(received=len(items))
        doc_hashes = dict(doc_hashes or {})
        with self._write() as conn:
            new, report.skipped_existing, report.skipped_duplicate_content = plan_insert(_Stored(), conn, items)
            chosen = [items[i] for i in new]
            _forget_documents(conn, {p.doc_id or p.id for p, _ in chosen} - set(doc_hashes))
            _record_documents(conn, doc_hashes)
            if not chosen:
                return report  # commits the fingerprints (if any); the generation stays
            given = None if vectors is None else np.asarray(vectors, dtype=np.float32)[new]
            change = self._apply(conn, [], chosen, given, progress, report.seconds, ner)
        self._written(change, report.seconds)
        report.added, report.embedded = len(change.added), change.embedded
        return report

    def put_documents(self, documents: Sequence[Document], progress: Progress | None = None,
                      delete: Sequence[str] = ()) -> PutReport:
        """Make each document hold exactly its given passages and delete the documents in `delete`, in
        one transaction: new documents are added, changed ones replaced (passages with the same id and
        content stay; the vectors of staged content and of removed passages are reused, only new
        content is embedded)."""
        docs = check_documents(list(documents))
        delete = list(dict.fromkeys(delete))
        if not docs and not delete:
            raise InputError("no documents given to put or delete")
        validate_passages([p for d in docs for p in d.passages])
        progress = progress or NullProgress()
        report = PutReport(documents=len(docs))
        with self._write() as conn:
            plan = plan_put(_Stored(), conn, docs, delete)
            _record_documents(conn, {d.doc_id: (d.content_hash, d.source) for d in docs})
            report.deleted_documents = len(delete)
            report.kept, report.created = plan.kept, plan.created
            report.skipped_duplicate_content = plan.skipped_duplicate_content
            report.unchanged = len(plan.unchanged)
            if not plan.removed_rows and not plan.insert:
                return report  # commits the fingerprints; the generation stays
            change = self._apply(conn, plan.removed_rows, plan.insert, None, progress, report.seconds)
            _forget_documents(conn, delete)
        self._written(change, report.seconds)
        report.added, report.removed = len(change.added), change.removed
        report.embedded = change.embedded
        report.reused_vectors = len(change.added) - change.embedded
        return report

    def delete_documents(self, doc_ids: Sequence[str], progress: Progress | None = None) -> DeleteReport:
        """Delete whole documents in one transaction; an unknown doc_id is an error and nothing is deleted."""
        doc_ids = ids_to_delete(doc_ids, "document")
        report = DeleteReport()
        with self._write() as conn:
            found = _Stored.document_rows(conn, doc_ids)
            missing = sorted(set(doc_ids) - {d for _, _, d, _ in found})
            if missing:
                shown = ", ".join(missing[:10]) + (" ..." if len(missing) > 10 else "")
                raise InputError(f"{len(missing)} document(s) not in the index {self.path}: {shown}; "
                                 f"nothing was deleted")
            change = self._apply(conn, sorted(r for r, _, _, _ in found), [], None, progress or NullProgress(),
                                 report.seconds)
            _forget_documents(conn, doc_ids)
        self._written(change, report.seconds)
        report.deleted, report.documents = change.removed, len(doc_ids)
        return report

    def delete(self, ids: Sequence[str], progress: Progress | None = None) -> DeleteReport:
        """Delete passages by id in one transaction; unknown ids are an error and nothing is deleted.
        The documents they belong to lose their recorded fingerprint (changed passage by passage)."""
        ids = ids_to_delete(ids, "passage")
        report = DeleteReport()
        with self._write() as conn:
            found = {i: (int(r), d) for i, r, d in conn.execute(
                "SELECT id, prow, doc_id FROM passages WHERE id = ANY(%s)", (ids,)).fetchall()}
            missing = [i for i in ids if i not in found]
            if missing:
                shown = ", ".join(missing[:10]) + (" ..." if len(missing) > 10 else "")
                raise InputError(f"{len(missing)} id(s) not in the index {self.path}: {shown}; nothing was deleted")
            change = self._apply(conn, sorted(r for r, _ in found.values()), [], None, progress or NullProgress(),
                                 report.seconds)
            _forget_documents(conn, {d for _, d in found.values()})
        self._written(change, report.seconds)
        report.deleted = change.removed
        return report

    def documents(self, prefix: str | None = None) -> dict[str, DocumentInfo]:
        """Every document with stored passages (those whose doc_id or recorded source starts with
        `prefix`, when given), by doc_id; content_hash is "" when no fingerprint is recorded."""
        def q(c: psycopg.Connection) -> list[tuple[Any, ...]]:
            return c.execute(
                f"SELECT p.doc_id, count(*), coalesce(d.content_hash, ''), coalesce(d.source, ''), d.title, "
                f"{_UTC_STAMP}, d.size, d.tags "
                "FROM passages p LEFT JOIN documents d ON d.doc_id = p.doc_id "
                "WHERE %(prefix)s::text IS NULL OR starts_with(p.doc_id, %(prefix)s) "
                "OR starts_with(d.source, %(prefix)s) "
                "GROUP BY p.doc_id, d.doc_id ORDER BY p.doc_id COLLATE \"C\"",
                {"prefix": prefix or None}).fetchall()

        return {d: DocumentInfo(d, int(n), h, src, title, modified, None if size is None else int(size),
                                tuple(tags or ()))
                for d, n, h, src, title, modified, size, tags in self._primary(q)}

    def put_document_meta(self, metas: Mapping[str, DocumentMeta]) -> int:
        """Rewrite the rows of stored documents with their title, modification time, size and tags (their
        passages untouched: the passages' generation stays); how many were written."""
        if not metas:
            return 0
        with self._write() as conn:
            return _put_document_meta(conn, metas)

    def unembedded(self, hashes: Sequence[str]) -> list[str]:
        """The content hashes among `hashes` with neither a stored passage nor a staged vector (each
        once, in order)."""
        wanted = list(dict.fromkeys(hashes))

        def q(c: psycopg.Connection) -> set[str]:
            out: set[str] = set()
            for start in range(0, len(wanted), LOOKUP_CHUNK):
                out.update(h for (h,) in c.execute(
                    "SELECT h FROM unnest(%s::text[]) AS x(h) "
                    "WHERE NOT EXISTS (SELECT 1 FROM passages p WHERE p.content_hash = x.h) "
                    "AND NOT EXISTS (SELECT 1 FROM staged_vectors s WHERE s.content_hash = x.h)",
                    (wanted[start : start + LOOKUP_CHUNK],)).fetchall())
            return out

        missing = self._primary(q) if wanted else set()
        return [h for h in wanted if h in missing]

    def count_staged(self, hashes: Sequence[str]) -> int:
        """How many of `hashes` have a staged vector but no stored passage (an interrupted ingest's work)."""
        wanted = list(dict.fromkeys(hashes))

        def q(c: psycopg.Connection) -> int:
            return sum(int(_scalar(c.execute(
                "SELECT count(*) FROM staged_vectors s WHERE s.content_hash = ANY(%s) "
                "AND NOT EXISTS (SELECT 1 FROM passages p WHERE p.content_hash = s.content_hash)",
                (wanted[start : start + LOOKUP_CHUNK],)))) for start in range(0, len(wanted), LOOKUP_CHUNK))

        return self._primary(q) if wanted else 0

    def stage_vectors(self, hashes: Sequence[str], vectors: np.ndarray) -> None:
        """Commit vectors for content not stored yet (an ingest's progress, kept if it is killed): one
        short transaction of its own, without the write lock (a long write elsewhere does not hold it
        up) and without a new generation (no passage changes)."""
        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.shape != (len(hashes), DIMENSION):
            raise InputError(f"{len(hashes)} hashes need a ({len(hashes)}, {DIMENSION}) array, got {vectors.shape}")
        if not np.all(np.isfinite(vectors)):
            raise InputError("staged vectors must be finite numbers")
        # in content-hash order, as `_apply` locks the rows it deletes: concurrent writers cannot deadlock
        rows = sorted({h: v for h, v in zip(hashes, vectors, strict=True)}.items())
        if not rows:
            return

        def upsert(c: psycopg.Connection) -> None:
            with c.transaction(), c.cursor() as cur:
                cur.executemany(
                    "INSERT INTO staged_vectors (content_hash, vector) SELECT %(h)s, %(v)s "
                    "WHERE NOT EXISTS (SELECT 1 FROM passages WHERE content_hash = %(h)s) "
                    "ON CONFLICT (content_hash) DO UPDATE SET vector = EXCLUDED.vector, staged_at = now()",
                    [{"h": h, "v": v} for h, v in rows])

        self._primary(upsert)

    def _apply(self, conn: psycopg.Connection, removed: Sequence[int], chosen: Sequence[tuple[Passage, str]],
               vectors: np.ndarray | None, progress: Progress, seconds: dict[str, float],
               ner: Mapping[str, tuple[str, ...]] | None = None) -> _Change:
        """The passage change of every write, in the caller's write transaction: delete the rows
        `removed` (their postings and NER go with them, BM25 document frequencies drop), insert
        `chosen` (vectors: the given ones, else those staged or stored for the same content, else
        embedded now), rewrite the entity graph, update the BM25 statistics and the generation."""
        t = time.perf_counter()
        embedded = 0
        if vectors is None:
            vecs, embedded = self._vectors_for(conn, chosen, progress)
        else:
            vecs = np.asarray(vectors, dtype=np.float32)
        if vecs.shape != (len(chosen), DIMENSION) or not np.all(np.isfinite(vecs)):
            raise InputError(f"vectors must be {len(chosen)} x {DIMENSION} finite numbers, got {vecs.shape}")
        seconds["embed"] = time.perf_counter() - t
        t = time.perf_counter()
        tokens = self._tokenise(chosen, progress)
        seconds["bm25"] = time.perf_counter() - t
        t = time.perf_counter()
        lost = self._delete_rows(conn, removed)
        seconds["delete"] = time.perf_counter() - t
        t = time.perf_counter()
        stored = int(self.meta(conn, "n_passages")) - len(removed)
        rebuild = len(chosen) >= 1000 and len(chosen) >= BULK_REBUILD_SHARE * stored
        if rebuild:
            conn.execute(f"DROP INDEX IF EXISTS {HNSW_INDEX}")
        added = self._insert_rows(conn, chosen, tokens, vecs)
        seconds["passages"] = time.perf_counter() - t
        t = time.perf_counter()
        self._add_postings(conn, [(r.row, toks) for r, toks in zip(added, tokens, strict=True)])
        seconds["bm25_tables"] = time.perf_counter() - t
        t = time.perf_counter()
        old = self._bm25_for_write(conn)
        new = old.index.updated(added, list(removed), tokens_of=tokens)  # tokenised once, above
        bm25 = BM25State(bm25_blobs.write(conn, old.index, new), new, [old.index])
        seconds["bm25_index"] = time.perf_counter() - t
        t = time.perf_counter()
        known = {r.row: tuple(ner[r.id]) for r in added if ner is not None and r.id in ner}
        self._rewrite_graph(conn, added, list(removed), known, progress)
        seconds["graph"] = time.perf_counter() - t
        if rebuild:
            t = time.perf_counter()
            self._create_hnsw(conn)
            seconds["hnsw"] = time.perf_counter() - t
        self._bump(conn, len(added) - len(removed), sum(len(x) for x in tokens) - lost)
        return _Change(added, len(removed), embedded, rebuild, bm25)

