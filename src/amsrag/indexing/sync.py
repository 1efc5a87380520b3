"""`index sync`: keep an index equal to folders of documents — new files added, changed files replaced
(only their changed passages re-embedded), removed files deleted.

A folder declared as NAME (by default its own name) owns the documents whose source key starts with
`NAME/`; a file is unchanged when every document recorded from it carries the file's current sha256.
The documents of an unchanged file whose tags (`--tag`, the folder's amsrag.toml, front matter), modification
time or size differ from their row get the row rewritten alone, their passages untouched.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from amsrag.errors import InputError
from amsrag.indexing.document_meta import file_meta
from amsrag.indexing.job import Job, JobFile, JobReport, Notice, refresh_derived, replace_files
from amsrag.indexing.tables import document_table_ids, read_table_inputs
from amsrag.ingest.api import InputRoot, input_roots, source_files
from amsrag.ingest.formats import PassedOver
from amsrag.progress import Progress
from amsrag.store.base import Store
from amsrag.store.documents import DocumentInfo, DocumentMeta
from amsrag.tables.table import Table


def sync_folders(index: Store, folders: Sequence[Path | str], fmt: str = "auto", delete: bool = True,
                 progress: Progress | None = None, notice: Notice | None = None,
                 skip_unreadable: bool = False, tags: Sequence[str] = ()) -> JobReport:
    """Bring `index` in line with `folders` (each `PATH` or `NAME=PATH`); see the module doc. `skip_unreadable`:
    a file that cannot be read is a `skipped` line of the report (what it had stored is kept) rather than an
    error that stops the sync. `tags` (`--tag`): given to every document of the folders."""
    t0 = time.perf_counter()
    job = Job(index, progress, notice, fmt, skip_unreadable=skip_unreadable, tags=tags)
    roots = input_roots(folders)
    for root in roots:
        if not root.path.is_dir():
            raise InputError(f"{root.path}: index sync keeps folders in step; for a single file use "
                             f"`amsrag index add --replace {root.path}`")
    tables = read_table_inputs(roots)
    changed: list[JobFile] = []
    gone: list[str] = []
    held: dict[str, list[str]] = {}  # documents stored from each changed file: kept when it is skipped now
    retagged: dict[str, DocumentMeta] = {}  # documents of unchanged files whose row alone changes
    unchanged: set[str] = set()  # keys of the files not read again
    for root in roots:
        by_source = _stored_by_source(index.documents(prefix=f"{root.name}/"))
        passed_over: PassedOver = []
        sources = source_files(root, fmt, bool(tables.tables), passed_over)
        job.passed_over(root, passed_over)
        for src in sources:
            fp = src.fingerprint()
            stored = by_source.pop(src.key, [])
            f = job.job_file(root, src, fp)
            if stored and all(d.content_hash == fp for d in stored):
                job.report.documents_unchanged += len(stored)
                unchanged.add(src.key)
                retagged.update(_changed_rows(job, f, stored))
                continue
            changed.append(f)
            held[src.key] = [d.doc_id for d in stored]
            # documents this file held before; those it no longer holds are deleted with the first batch
            gone.extend(d.doc_id for d in stored)
        if delete:
            gone.extend(d.doc_id for docs in by_source.values() for d in docs)
    need = job.scan(changed) if changed else []
    kept = {doc_id for key in job.skipped for doc_id in held.get(key, ())}
    deletions = sorted(set(gone) - job.doc_ids - kept)
    _sync_tables(job, roots, tables.tables, delete, unchanged)
    with job.progress.task("dense: embed", len(need)) as adv:
        if changed or deletions:
            replace_files(job, changed, index.config.ingest.batch_passages, adv, delete=deletions)
    index.put_document_meta({**job.read_meta(changed), **retagged})
    job.report.documents_meta_updated = len(retagged)
    refresh_derived(job)
    job.report.seconds["total"] = time.perf_counter() - t0
    return job.report


def _sync_tables(job: Job, roots: Sequence[InputRoot], tables: Sequence[Table], delete: bool,
                 unchanged: set[str]) -> None:
    """Tables of the folders' table files and of the document files read again written (unchanged ones skipped by
    content hash); the tables a re-read document no longer holds deleted with it; with `delete`, stored tables of
    these folders whose file is gone deleted too (those of `unchanged` and skipped document files are kept)."""
    index = job.index
    found = [*tables, *job.document_tables()]
    if found:
        job.report.table_rows_padded += sum(t.padded_rows for t in found)
        job.report.count_tables(index.put_tables(found, replace=True))
    stored = index.tables()
    if stored is None:
        return
    present = {t.table_id for t in found}
    ids = stored.table_ids()
    doomed = document_table_ids(ids, job.file_tables.keys()) - present
    if delete:
        kept = document_table_ids(ids, unchanged | job.skipped)
        prefixes = tuple(f"{root.name}/" for root in roots)
        doomed |= {tid for tid in ids if tid.startswith(prefixes) and tid not in present and tid not in kept}
    if doomed:
        job.report.tables_deleted += index.delete_tables(sorted(doomed)).deleted


def _changed_rows(job: Job, f: JobFile, stored: list[DocumentInfo]) -> dict[str, DocumentMeta]:
    """The rows of an unchanged file's documents that differ from what the file and its tags say now (the
    stored title kept: the file is not read again)."""
    try:
        now = file_meta(f.source, f.tags)
    except InputError as exc:  # its front matter: refused like an unreadable file
        if not job.skip_unreadable:
            raise
        job.skip(f, str(exc))
        return {}
    out = {}
    for d in stored:
        meta = replace(now, title=d.title)
        if meta != d.meta:
            out[d.doc_id] = meta
    return out


def _stored_by_source(documents: dict[str, DocumentInfo]) -> dict[str, list[DocumentInfo]]:
    """Stored documents grouped by the file they came from (a document recorded without a source, e.g.
    by an older amsrag, is taken to come from the file its doc_id names)."""
    out: dict[str, list[DocumentInfo]] = {}
    for d in documents.values():
        out.setdefault(d.source or d.doc_id, []).append(d)
    return out
