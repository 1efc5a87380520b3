"""Streaming, resumable writes of input files into an index.

A job reads its input twice, as a stream: a first pass chunks every file (so bad input is refused
before anything is written) and counts the passages whose vectors are not stored yet; the second
pass commits batches of `ingest.batch_passages` passages, one transaction each. Before a batch is
committed its missing vectors are embedded and *staged* in the index every `ingest.stage_every`
passages or `ingest.stage_seconds` of embedding, whichever comes first (`stage_size`; the stage size
follows the rate of the last stage) (`PassageIndex.stage_vectors`): a job killed at any point keeps its
committed batches and its staged vectors, and the next run embeds only what is left ("resuming: N of M
passages already embedded"). Memory holds one batch, not the input.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from amsrag.embed.encoder import passage_text_for_embedding
from amsrag.errors import InputError
from amsrag.indexing.document_meta import document_title, file_meta, given_tags
from amsrag.indexing.tables import document_table_ids, read_table_inputs
from amsrag.indexing.themes import refresh_themes
from amsrag.ingest.api import FileReader, IdRegistry, InputRoot, SourceFile, input_roots, source_files
from amsrag.ingest.formats import PassedOver, printable_path
from amsrag.ingest.parsers import ParseBudget, SkippedDocument
from amsrag.ingest.readers import base_suffix
from amsrag.ingest.sidecar import FolderTags, read_sidecar
from amsrag.progress import Advance, NullProgress, Progress
from amsrag.store.base import Store
from amsrag.store.documents import Document, DocumentMeta
from amsrag.store.writes import with_language
from amsrag.tables.catalog import TableWriteReport
from amsrag.tables.table import Table
from amsrag.types import Passage

log = logging.getLogger("amsrag.indexing")
Notice = Callable[[str], None]
Clock = Callable[[], float]
FIRST_STAGE = 64  # passages of the first stage of a job, before any rate is measured


def stage_size(stage_every: int, stage_seconds: float, last_passages: int, last_seconds: float) -> int:
    """Passages for the next staged commit: `stage_every`, or fewer when the last stage's rate (`last_passages`
    in `last_seconds`) would take longer than `stage_seconds` — by size or time, whichever comes first. Before
    any stage (`last_passages` 0) a first stage of FIRST_STAGE measures the rate."""
    if last_passages <= 0:
        return min(stage_every, FIRST_STAGE)
    if last_seconds <= 0:
        return stage_every
    return max(1, min(stage_every, int(last_passages / last_seconds * stage_seconds)))


@dataclass
class JobReport:
    """What an ingest or sync job did, summed over its batches."""

    files: int = 0
    received: int = 0  # passages read from the inputs
    added: int = 0
    skipped_existing: int = 0  # identical passage already stored
    skipped_duplicate_content: int = 0  # same content stored under another id / document
    kept: int = 0  # replace / sync: passages of changed documents that stayed as they were
    removed: int = 0  # replace / sync: passages deleted
    documents_created: int = 0
    documents_replaced: int = 0
    documents_unchanged: int = 0
    documents_deleted: int = 0
    documents_meta_updated: int = 0  # sync: unchanged documents whose row alone was rewritten (tags, time, size)
    embedded: int = 0  # passages embedded by this run
    resumed: int = 0  # passages whose vectors an interrupted run had staged
    batches: int = 0  # committed transactions
    stages: int = 0  # staged commits of embedded vectors
    tables_added: int = 0
    tables_replaced: int = 0
    tables_unchanged: int = 0
    tables_deleted: int = 0
    table_rows: int = 0  # rows written
    table_rows_padded: int = 0  # rows read with fewer cells than their header (padded with empty cells)
    themes: dict[str, Any] = field(default_factory=dict)  # `ThemesReport.to_dict()` of the themes refresh
    languages: dict[str, int] = field(default_factory=dict)  # passages read, by detected language
    skipped_files: list[dict[str, str]] = field(default_factory=list)  # {file, reason}: files not read or left out
    seconds: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if k != "seconds"}
        out["tables"] = {"added": self.tables_added, "replaced": self.tables_replaced,
                         "unchanged": self.tables_unchanged, "deleted": self.tables_deleted,
                         "rows": self.table_rows, "rows_padded": self.table_rows_padded}
        out["skipped_kinds"] = [{"suffix": suffix, "reason": reason, "files": n}
                                for (suffix, reason), n in self.skipped_kinds().items()]
        out["skipped_summary"] = self.skipped_summary()
        out["seconds"] = {k: round(v, 3) for k, v in self.seconds.items()}
        return out

    def skipped_kinds(self) -> dict[tuple[str, str], int]:
        """The skipped files counted by (extension, reason), most first."""
        kinds = Counter((base_suffix(Path(f["file"])) or "(no extension)", f["reason"]) for f in self.skipped_files)
        return dict(kinds.most_common())

    def skipped_summary(self) -> str:
        """"skipped 3 files: 2 .xyz (unsupported format), 1 .docx (...)", or "" when every file was read."""
        if not self.skipped_files:
            return ""
        n = len(self.skipped_files)
        return (f"skipped {n} file{'s' if n != 1 else ''}: "
                + ", ".join(f"{count} {suffix} ({reason})" for (suffix, reason), count in self.skipped_kinds().items()))

    def tables_summary(self) -> str:
        """"added 2 tables (31 rows)", with the replaced / unchanged / deleted ones when there are any."""
        written = self.tables_added + self.tables_replaced
        parts = [f"added {self.tables_added} table{'s' if self.tables_added != 1 else ''}"
                 + (f", replaced {self.tables_replaced}" if self.tables_replaced else "")
                 + (f" ({self.table_rows} rows)" if written else "")]
        if self.tables_unchanged:
            parts.append(f"{self.tables_unchanged} unchanged")
        if self.tables_deleted:
            parts.append(f"{self.tables_deleted} deleted")
        return ", ".join(parts)

    def count_languages(self, passages: Sequence[Passage]) -> list[Passage]:
        """`passages` with their detected language in the metadata (`lang`), counted."""
        out = [with_language(p) for p in passages]
        for p in out:
            self.languages[p.metadata["lang"]] = self.languages.get(p.metadata["lang"], 0) + 1
        return out

    def count_tables(self, written: TableWriteReport) -> None:
        self.tables_added += written.added
        self.tables_replaced += written.replaced
        self.tables_unchanged += written.skipped
        self.table_rows += written.rows


@dataclass
class JobFile:
    """One source file of a job, with the fingerprint it is recorded under when written in full."""

    source: SourceFile
    fingerprint: str
    tags: tuple[str, ...] = ()  # the command's and the folder sidecar's (front matter tags are read with it)


class Job:
    """The machinery an ingest and a sync share: scanning, staged embedding, batched commits."""

    def __init__(self, index: Store, progress: Progress | None = None, notice: Notice | None = None,
                 fmt: str = "auto", clock: Clock = time.perf_counter, skip_unreadable: bool = False,
                 tags: Sequence[str] = ()) -> None:
        """`skip_unreadable`: a file that cannot be read (empty, malformed JSONL, ...) is skipped like a corrupt
        document instead of stopping the job (a watched folder may show a file half-written). `tags`: the
        command's `--tag` values, given to every document the job reads."""
        self.index = index
        self.tags = given_tags(tags)
        self._folders: dict[Path, FolderTags] = {}
        self.file_docs: dict[str, list[str]] = {}  # documents read from each file (by key), in order
        self.file_meta: dict[str, DocumentMeta] = {}  # the metadata of each file read (title: None)
        self.titles: dict[str, str] = {}  # the title of each document file's document
        self.skip_unreadable = skip_unreadable
        self.clock = clock  # times the stages (`stage_size`)
        self.last_stage = (0, 0.0)  # (passages, seconds) of the last stage
        self.config = index.config
        self.progress = progress or NullProgress()
        self.notice = notice or (lambda message: None)
        ingest = self.config.ingest
        self.reader = FileReader(self.config.chunking, ingest.max_file_mb, ParseBudget(
            ingest.max_pages, int(ingest.max_markup_mb * (1 << 20)), int(ingest.max_text_mb * (1 << 20)),
            int(ingest.max_file_mb * (1 << 20)), ingest.ocr_max_pages), notice=self.say)
        self.fmt = fmt
        self.report = JobReport()
        self.doc_ids: set[str] = set()  # documents met by `scan`
        self.skipped: set[str] = set()  # keys of the files `scan` left out (SkippedDocument)
        self.file_tables: dict[str, list[Table]] = {}  # the real tables of each document file `scan` read, by key

    def job_file(self, root: InputRoot, source: SourceFile, fingerprint: str) -> JobFile:
        """A file of `root` with its tags: the command's and those its folder's sidecar gives its path."""
        if root.path.is_dir() and source.relative:
            if root.path not in self._folders:
                self._folders[root.path] = read_sidecar(root.path)
            return JobFile(source, fingerprint, (*self.tags, *self._folders[root.path].tags_for(source.relative)))
        return JobFile(source, fingerprint, self.tags)

    def say(self, message: str) -> None:
        log.info(message)
        self.notice(message)

    # ---------------------------------------------------------------- pass 1
    def scan(self, files: Sequence[JobFile]) -> list[str]:
        """Read and chunk every file once (errors surface before any write); the content hashes of the
        passages that need a vector, each once."""
        registry = IdRegistry()
        hashes: dict[str, None] = {}
        t = time.perf_counter()
        with self.progress.task("read: chunk files", len(files)) as adv:
            for f in files:
                found: list[Table] = []
                try:
                    read = list(self.reader.passages(f.source, found))
                    self.file_meta[f.source.key] = file_meta(f.source, f.tags)
                    self.file_tables[f.source.key] = found
                except SkippedDocument as exc:
                    self.skip(f, exc.reason)
                    read = []
                except InputError as exc:
                    if not self.skip_unreadable:
                        raise
                    self.skip(f, str(exc))
                    read = []
                docs = self.file_docs.setdefault(f.source.key, [])
                for place, p in read:
                    if registry.admit(p, place):
                        hashes[p.content_hash] = None
                        doc_id = p.doc_id or p.id
                        if doc_id not in self.doc_ids:
                            docs.append(doc_id)
                            if doc_id == f.source.key:
                                self.titles[doc_id] = document_title(p.title)
                        self.doc_ids.add(doc_id)
                        self.report.received += 1
                adv(1)
        self.report.files += len(files)
        need = self.index.unembedded(list(hashes))
        staged = self.index.count_staged(list(hashes))
        self.report.resumed = staged
        if staged:
            self.say(f"resuming: {staged} of {len(need) + staged} passages already embedded (staged by an "
                     f"interrupted run); embedding the other {len(need)}")
        self.report.seconds["read"] = time.perf_counter() - t
        return need

    def document_tables(self) -> list[Table]:
        """The real tables of the document files `scan` read (HTML, DOCX), in file order."""
        return [t for tables in self.file_tables.values() for t in tables]

    def passed_over(self, root: InputRoot, files: PassedOver) -> None:
        """The files of a folder that were not read (unsupported format, ...): counted in the report."""
        for path, reason in files:
            key = f"{root.name}/{printable_path(path.relative_to(root.path))}"
            self.report.skipped_files.append({"file": key, "reason": reason})
            log.info("%s: not read: %s", key, reason)

    def skip(self, f: JobFile, reason: str) -> None:
        """A document left out: one line in the report, the rest of the input goes on."""
        self.skipped.add(f.source.key)
        self.report.skipped_files.append({"file": f.source.key, "reason": reason})
        self.say(f"{f.source.key}: skipped: {reason}")

    def read_meta(self, files: Sequence[JobFile]) -> dict[str, DocumentMeta]:
        """The rows of the documents read from `files` (skipped files left out)."""
        out: dict[str, DocumentMeta] = {}
        for f in files:
            meta = self.file_meta.get(f.source.key)
            if meta is None or f.source.key in self.skipped:
                continue
            for doc_id in self.file_docs.get(f.source.key, ()):
                out[doc_id] = replace(meta, title=self.titles.get(doc_id))
        return out

    # ---------------------------------------------------------------- pass 2
    def passages_of(self, f: JobFile) -> Iterator[Passage]:
        if f.source.key in self.skipped:
            return
        for _, p in self.reader.passages(f.source):
            yield p

    def embed_missing(self, passages: Sequence[Passage], advance: Advance) -> None:
        """Embed the passages whose content has no stored vector, staged by size or time (`stage_size`)."""
        by_hash = {p.content_hash: p for p in passages}
        missing = self.index.unembedded(list(by_hash))
        ingest = self.config.ingest
        t = time.perf_counter()
        start = 0
        while start < len(missing):
            chunk = missing[start : start + stage_size(ingest.stage_every, ingest.stage_seconds, *self.last_stage)]
            start += len(chunk)
            began = self.clock()
            texts = [passage_text_for_embedding(by_hash[h].title, by_hash[h].text) for h in chunk]
            vectors = self.index.encoder.encode(texts)
            self.last_stage = (len(chunk), self.clock() - began)
            self.index.stage_vectors(chunk, np.asarray(vectors, dtype=np.float32))
            self.report.embedded += len(chunk)
            self.report.stages += 1
            advance(len(chunk))
        self.report.seconds["embed"] = self.report.seconds.get("embed", 0.0) + time.perf_counter() - t

    def add_batch(self, passages: list[Passage], doc_hashes: dict[str, tuple[str, str]], advance: Advance) -> None:
        passages = self.report.count_languages(passages)
        self.embed_missing(passages, advance)
        t = time.perf_counter()
        r = self.index.add(passages, self.progress, doc_hashes=doc_hashes)
        self.report.seconds["commit"] = self.report.seconds.get("commit", 0.0) + time.perf_counter() - t
        self.report.added += r.added
        self.report.skipped_existing += r.skipped_existing
        self.report.skipped_duplicate_content += r.skipped_duplicate_content
        self.report.embedded += r.embedded  # vectors a concurrent writer dropped in between
        self.report.batches += 1

    def put_batch(self, documents: list[Document], delete: Sequence[str], advance: Advance) -> None:
        documents = [replace(d, passages=tuple(self.report.count_languages(d.passages))) for d in documents]
        self.embed_missing([p for d in documents for p in d.passages], advance)
        t = time.perf_counter()
        r = self.index.put_documents(documents, self.progress, delete=delete)
        self.report.seconds["commit"] = self.report.seconds.get("commit", 0.0) + time.perf_counter() - t
        self.report.added += r.added
        self.report.removed += r.removed
        self.report.kept += r.kept
        self.report.skipped_duplicate_content += r.skipped_duplicate_content
        self.report.documents_created += r.created
        self.report.documents_unchanged += r.unchanged
        self.report.documents_replaced += r.documents - r.created - r.unchanged
        self.report.documents_deleted += r.deleted_documents
        self.report.embedded += r.embedded
        self.report.batches += 1


def refresh_derived(job: Job) -> None:
    """After the passages changed: the corpus themes follow (incrementally, or rebuilt when due)."""
    t = time.perf_counter()
    job.report.themes = refresh_themes(job.index, notice=job.say, progress=job.progress).to_dict()
    job.report.seconds["themes"] = time.perf_counter() - t


def ingest_inputs(index: Store, inputs: Sequence[Path | str], fmt: str = "auto", replace: bool = False,
                  progress: Progress | None = None, notice: Notice | None = None,
                  clock: Clock = time.perf_counter, tags: Sequence[str] = ()) -> JobReport:
    """Add the passages of files and folders to `index` in committed batches (see the module doc).

    Without `replace`, identical passages already stored are skipped and a passage id stored with
    other content is an error; with `replace`, each input file's documents are replaced as a whole
    (`put_documents`): changed passages re-embedded, removed ones deleted. `clock` times the staged
    commits (`stage_size`). `tags` (`--tag`) go to every document read, beside a folder's `amsrag.toml` and
    Markdown front matter tags (`amsrag.indexing.document_meta`).
    """
    t0 = time.perf_counter()
    job = Job(index, progress, notice, fmt, clock, tags=tags)
    tables = read_table_inputs(input_roots(inputs))
    files = []
    for root in tables.roots:
        passed_over: PassedOver = []
        files += [job.job_file(root, s, s.fingerprint())
                  for s in source_files(root, fmt, bool(tables.tables), passed_over)]
        job.passed_over(root, passed_over)
    need = job.scan(files)
    if not job.report.received and not tables.tables and not job.document_tables():
        raise InputError(f"empty corpus: no passages or tables found in {', '.join(map(str, inputs))}; nothing was "
                         f"added")
    found = [*tables.tables, *job.document_tables()]
    if found:
        job.report.table_rows_padded += sum(t.padded_rows for t in found)
        job.report.count_tables(index.put_tables(found, replace=replace))
        job.say(f"tables: {len(found)} read from {len(tables.files) + sum(map(bool, job.file_tables.values()))} "
                f"file(s); {job.report.tables_added} new, {job.report.tables_replaced} replaced, "
                f"{job.report.tables_unchanged} unchanged")
    if replace:
        drop_stale_document_tables(job, job.file_tables.keys(), {t.table_id for t in found})
    batch_size = index.config.ingest.batch_passages
    with job.progress.task("dense: embed", len(need)) as adv:
        if replace:
            replace_files(job, files, batch_size, adv, delete=())
        else:
            batch: list[Passage] = []
            done: dict[str, tuple[str, str]] = {}
            registry = IdRegistry()
            for f in files:
                for p in job.passages_of(f):
                    if not registry.admit(p, f.source.key):
                        continue
                    batch.append(p)
                    if len(batch) >= batch_size:
                        job.add_batch(batch, done, adv)
                        batch, done = [], {}
                done.update(_completed(f, batch, job.skipped))
            if batch or done:
                job.add_batch(batch, done, adv)
    index.put_document_meta(job.read_meta(files))
    refresh_derived(job)
    job.report.seconds["total"] = time.perf_counter() - t0
    return job.report


def drop_stale_document_tables(job: Job, keys: Iterable[str], present: set[str]) -> None:
    """Delete the stored tables of the document files `keys` (`<key>#table-N`) that are not in `present`: a
    document's tables are replaced with it."""
    stored = job.index.tables()
    if stored is None:
        return
    stale = document_table_ids(stored.table_ids(), keys) - present
    if stale:
        job.report.tables_deleted += job.index.delete_tables(sorted(stale)).deleted


def _completed(f: JobFile, batch: list[Passage], skipped: set[str]) -> dict[str, tuple[str, str]]:
    """The documents of a text / Markdown file once all its passages are read ({doc_id: (fp, key)})."""
    if base_suffix(f.source.path) in (".jsonl", ".json") or f.source.key in skipped:
        return {}  # passage files: their records are documents of their own
    return {f.source.key: (f.fingerprint, f.source.key)}


def replace_files(job: Job, files: Sequence[JobFile], batch_size: int, adv: Advance, delete: Sequence[str]) -> None:
    """put_documents per batch of whole files; `delete` goes with the first batch (so content moved from
    a deleted document to a new one keeps its vector)."""
    pending: list[Document] = []
    size = 0
    first = True
    for f in files:
        docs = _documents_of(job, f)
        pending.extend(docs)
        size += sum(len(d.passages) for d in docs)
        if size >= batch_size:
            job.put_batch(pending, delete if first else (), adv)
            pending, size, first = [], 0, False
    if pending or (first and delete):
        job.put_batch(pending, delete if first else (), adv)


def _documents_of(job: Job, f: JobFile) -> list[Document]:
    """The documents of one file, each fingerprinted by the file (grouped by doc_id in file order)."""
    groups: dict[str, list[Passage]] = {}
    for p in job.passages_of(f):
        groups.setdefault(p.doc_id or p.id, []).append(p)
    return [Document(doc_id, tuple(ps), f.fingerprint, f.source.key) for doc_id, ps in groups.items()]
