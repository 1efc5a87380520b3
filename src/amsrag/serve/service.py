"""The engine behind the HTTP layer: one Engine per process, reads under a shared lock, writes
serialised on one writer thread under the exclusive lock, retrievers warmed at start and after writes."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from amsrag.classify.library import HOP_LABELS
from amsrag.config import QueryLogConfig, ReviewConfig, ServeConfig, ShadowConfig
from amsrag.errors import InputError
from amsrag.filters import Where
from amsrag.ingest.readers import passage_from_record
from amsrag.monitor.drift import DriftDetector, reference_for_index
from amsrag.monitor.shadow import LoggingSink, MisrouteSink, ShadowComparison, ShadowProber
from amsrag.pipeline import Engine
from amsrag.pipeline.results import QuestionError, check_question
from amsrag.pipeline.systems import SYSTEMS
from amsrag.progress import Progress
from amsrag.querylog import QueryLog, QueryLogEntry, Redactor, entry_from_answer, query_log_for_index, secrets_of
from amsrag.querylog.writer import BackgroundAppender
from amsrag.retrieve.filtered import scope
from amsrag.retrievers import retriever_for
from amsrag.review import FILE as REVIEW_FILE
from amsrag.review import ReviewCandidate, ReviewQueue, candidate_of
from amsrag.serve.file_jobs import FileJobStore
from amsrag.serve.jobs import JOBS_FILE, Job, JobStore, Writer
from amsrag.serve.limits import ReadWriteLock
from amsrag.serve.metrics import Metrics
from amsrag.serve.sources import SourceRoots
from amsrag.store.base import Store
from amsrag.store.documents import Document
from amsrag.text.citations import citation_of
from amsrag.text.normalise import normalise_question
from amsrag.types import RETRIEVERS, Passage
from amsrag.version import __version__

log = logging.getLogger("amsrag.serve")
WARM_QUERY = "Who was the first person to walk on the Moon?"


def _default_ask(engine: Engine) -> Callable[[str, str], Any]:
    """Engine.ask with the generator the index's configuration names (the engine builds it once)."""
    return lambda q, s: engine.ask(q, system=s)


def jobs_file(index: object) -> Path | None:
    """Where an embedded index keeps the service's job records; None for PostgreSQL (kept in its database)."""
    if getattr(index, "backend", "") == "postgres" or not isinstance(getattr(index, "path", None), Path):
        return None
    return Path(index.path) / JOBS_FILE  # type: ignore[attr-defined]


def job_store(index: object) -> JobStore | None:
    """Where the service keeps its job records: the embedded index's `jobs.json`, or the PostgreSQL index's
    `amsrag.serve_jobs` table. None (records in memory only) when the store cannot be opened: the service runs."""
    if getattr(index, "backend", "") == "postgres":
        from amsrag.serve.pg_jobs import PostgresJobStore

        try:
            return PostgresJobStore(str(index.dsn))  # type: ignore[attr-defined]
        except Exception as exc:  # the service runs; its jobs are known until it stops
            log.warning("job records are kept in memory only: the database table cannot be opened (%s: %s)",
                        type(exc).__name__, exc)
            return None
    path = jobs_file(index)
    return FileJobStore(path) if path is not None else None


class _ReviewSink:
    """A shadow probe's misroute candidate: logged, and into the review queue (on the probe's worker thread)."""

    def __init__(self, service: Service, logging_sink: LoggingSink) -> None:
        self.service = service
        self.logging_sink = logging_sink

    def misroute_candidate(self, query: str, answer: dict[str, Any], comparison: ShadowComparison) -> None:
        self.logging_sink.misroute_candidate(query, answer, comparison)
        self.service.queue_misroute(query, comparison.system, answer, comparison.to_dict())


class Service:
    def __init__(self, engine: Engine[Store], config: ServeConfig, metrics: Metrics | None = None,
                 ask: Callable[[str, str], Any] | None = None, query_log: QueryLog | None = None,
                 log_config: QueryLogConfig | None = None, review_config: ReviewConfig | None = None,
                 shadow: ShadowConfig | None = None, misroutes: MisrouteSink | None = None,
                 sources: SourceRoots | None = None) -> None:
        """`log_config`: the [query_log] section (default: the index's); `query_log`: a log to write to
        whatever the section says (default: the index's own when the section enables it); `review_config`:
        the [review] section (default: the index's); `shadow`: the [shadow] section (default: the index's),
        `misroutes` where its disagreements go (default: the review queue when it is on, else the log);
        `sources`: the synced folders whose files `GET /v1/sources/NAME/PATH` serves (citations link to them)."""
        self.sources = sources or SourceRoots()
        self.engine = engine
        self.engine.max_question_chars = config.max_question_chars  # one limit: the engine refuses what we do
        self.config = config
        self.metrics = metrics or Metrics()
        self.lock = ReadWriteLock()
        self.writer = Writer(on_finish=self._job_finished, store=job_store(engine.index))
        self._ask = ask or _default_ask(engine)
        self.metrics.passages.set(len(engine.index))
        self.started = time.time()
        self.log_config = log_config or engine.config.query_log
        self._redactor = Redactor(secrets_of(engine.config, config))
        self.query_log = self._open_query_log(query_log)
        self.review_config = review_config or engine.config.review
        self.review_off = "the review queue is off: start the server with `amsrag serve --review` or set " \
                          "`[review] enabled = true`"
        self.review_queue: ReviewQueue | None = None
        self._review: BackgroundAppender[ReviewCandidate] | None = None
        if self.review_config.enabled:
            self._open_review_queue()
        self.drift = self._drift_detector()
        self.shadow = self._open_shadow(shadow or engine.config.shadow, misroutes)

    def _drift_detector(self) -> DriftDetector | None:
        """Drift of the routing against the index's reference (the shipped one when it has none)."""
        index = self.engine.index
        embedded = getattr(index, "backend", "") != "postgres"
        spec = str(getattr(index, "path" if embedded else "dsn"))
        try:
            reference, path = reference_for_index(spec)
        except InputError as exc:  # the service runs without drift gauges rather than not at all
            log.warning("drift monitoring is off: %s", exc)
            return None
        log.info("drift reference: %s (%s)", path, reference.source)
        return DriftDetector.for_config(reference, self.engine.config.monitor, index=spec if embedded else None)

    def _open_query_log(self, query_log: QueryLog | None) -> BackgroundAppender[QueryLogEntry] | None:
        if query_log is None and self.log_config.enabled:
            try:
                query_log = query_log_for_index(self.engine.index, self.log_config)
            except Exception as exc:  # the service runs without its log rather than not at all
                log.warning("the query log cannot be opened, answers are not logged: %s: %s", type(exc).__name__, exc)
                self.metrics.query_log_failures.inc()
                return None
        if query_log is None:
            return None
        log.info("logging answered questions to %s", query_log.location)
        return BackgroundAppender(query_log, on_failure=self.metrics.query_log_failures.inc)

    def _open_review_queue(self) -> None:
        index: Any = self.engine.index  # an embedded index has a directory (`path`), a PostgreSQL one a database
        if getattr(index, "backend", "") == "postgres":
            self.review_off = "the review queue is stored in an embedded index's directory; this PostgreSQL index " \
                              "has none"
            log.warning("%s", self.review_off)
            return
        try:
            self.review_queue = ReviewQueue(Path(index.path) / REVIEW_FILE, self.review_config.max_open,
                                            self.review_config.retention_days)
        except Exception as exc:  # the service runs without its queue rather than not at all
            self.review_off = f"the review queue cannot be opened: {type(exc).__name__}: {exc}"
            log.warning("%s", self.review_off)
            self.metrics.review_failures.inc()
            return
        log.info("queueing answers for review in %s", self.review_queue.location)
        self._review = BackgroundAppender(self.review_queue, on_failure=self.metrics.review_failures.inc,
                                          what="review queue")

    def flush_review(self, timeout_s: float = 30.0) -> None:
        """Wait until every answer queued for review so far was written (tests, shutdown)."""
        if self._review is not None:
            self._review.flush(timeout_s)

    def _open_shadow(self, config: ShadowConfig, sink: MisrouteSink | None) -> ShadowProber | None:
        if not config.enabled:
            return None
        self.engine.prestart_threads()  # the probe thread runs niced: requests must not inherit it via the pool
        log.info("shadow probes on: gray share %g, random share %g, at most %d a minute", config.gray_share,
                 config.random_share, config.per_minute)
        return ShadowProber(self._wider, config, self.engine.config.monitor,
                            sink=sink or self._misroute_sink(),
                            on_outcome=lambda outcome: self.metrics.shadow_probes.labels(outcome).inc(),
                            on_latency=self.metrics.shadow_latency.observe)

    def _wider(self, query: str, system: str) -> dict[str, Any]:
        """The shadow probe's wider path: the same question and generator on the widest route."""
        with self.lock.read():
            return self.engine.ask(query, system=system, widest=True).to_dict()

    def _misroute_sink(self) -> MisrouteSink:
        """Shadow probes' disagreements: into the review queue when it is on (also logged), else the log."""
        logging_sink = LoggingSink(self._redactor.text)
        if self._review is None:
            return logging_sink
        return _ReviewSink(self, logging_sink)

    @classmethod
    def open(cls, index_dir: str | Path, config: ServeConfig) -> Service:
        return cls(Engine.open(index_dir), config)

    def close(self) -> None:
        if self.shadow is not None:
            self.shadow.close()
        self.writer.close()
        if self.query_log is not None:
            self.query_log.close()
        if self._review is not None:
            self._review.close()  # closes the queue after the pending writes
        self.engine.close()

    # ------------------------------------------------------------------ warm-up
    def warm(self) -> dict[str, float]:
        """Build what the first query would otherwise pay for: the classifier, every retriever (the
        graph's query matcher), the generator. Errors are logged, not raised (an empty index is valid)."""
        with self.lock.read():
            return self._warm()

    def _warm_retriever(self, name: str) -> None:
        retriever_for(self.engine.index, name).search(WARM_QUERY, k=1)

    def _warm(self, with_ask: bool = True) -> dict[str, float]:
        ms: dict[str, float] = {}
        if not len(self.engine.index):
            return ms
        steps: list[tuple[str, Callable[[], Any]]] = [
            (name, partial(self._warm_retriever, name)) for name in RETRIEVERS]
        if with_ask:  # after a write only the retrievers are rebuilt; the generator is unchanged
            steps.append(("ask", lambda: self._ask(WARM_QUERY, "full")))
        for name, step in steps:
            t = time.perf_counter()
            try:
                step()
            except Exception as exc:
                log.warning("warm-up of %s failed: %s: %s", name, type(exc).__name__, exc)
            ms[name] = round((time.perf_counter() - t) * 1000, 1)
        return ms

    # ------------------------------------------------------------------ reads
    def retrieve(self, query: str, system: str, k: int | None, explain: bool = False,
                 where: Where | None = None) -> dict[str, Any]:
        with self.lock.read():
            out = self.engine.retrieve(query, system=system, k=k, where=where or None).to_dict()
            self._cite(out["passages"])
            if explain:
                out["titles"] = self._titles(out["trace"])
        self.metrics.observe_trace(out["trace"])
        return out

    def ask(self, query: str, system: str, explain: bool = False, source: str = "api",
            where: Where | None = None) -> dict[str, Any]:
        """`source`: who asked, for the query log (api: /v1/ask, openai: the chat completions route). `where`:
        the metadata filter retrieval keeps to."""
        with self.lock.read():
            with scope(self.engine.index.allowed_rows(where) if where else None):  # Engine.ask reads the scope
                out = self._ask(query, system).to_dict()
            # the cited passages themselves, so clients can show them without another request
            out["sources"] = [self._passage_dict(p) for p in map(self.engine.index.get, out["citations"]) if p]
            if explain:
                out["titles"] = self._titles(out["trace"])
        self.metrics.observe_trace(out["trace"])
        if self.drift is not None:
            self.drift.observe_signals(out["trace"].get("signals"))
            self.metrics.observe_drift(self.drift.status())
        if out.get("abstained"):
            self.metrics.abstentions.inc()
        if self.query_log is not None:
            self._log_answer(out, source)
        if self._review is not None:
            self._queue_for_review(out, system)
        if self.shadow is not None and not where:  # the probe's wider route would not keep to the filter
            self.shadow.offer(query, system, out)  # never raises; the probe runs after this request
        return out

    def queue_misroute(self, query: str, system: str, answer: dict[str, Any], details: dict[str, Any]) -> None:
        """A shadow probe's disagreement into the review queue, as a "shadow" item."""
        if self.review_queue is None:
            return
        reasons = details.get("reasons") or []
        details = {**details, "reason": "shadow probe: " + "; ".join(map(str, reasons)) if reasons else
                   "a shadow probe of the widest route disagrees with the answer"}
        try:
            self.review_queue.add_misroute_candidate(self._redactor.text(query), system,
                                                     self._redactor.value(answer), self._redactor.value(details))
            self.metrics.review_enqueued.labels("shadow").inc()
        except Exception as exc:  # a probe's bookkeeping never fails anything
            log.warning("review queue: a misroute candidate was not stored: %s: %s", type(exc).__name__, exc)
            self.metrics.review_failures.inc()

    def _queue_for_review(self, out: dict[str, Any], system: str) -> None:
        assert self._review is not None
        cfg = self.review_config
        try:
            # redacted before the item cuts its snippets: a cut secret would escape its pattern
            candidate = candidate_of(self._redactor.value(out), system, cfg.flagged, cfg.suspects)
            if candidate is not None:
                self._review.submit(candidate)
                self.metrics.review_enqueued.labels(candidate.kind).inc()
        except Exception as exc:  # the review queue never fails the answer
            log.warning("review queue: the item of an answer could not be built: %s: %s", type(exc).__name__, exc)
            self.metrics.review_failures.inc()

    def _log_answer(self, out: dict[str, Any], source: str) -> None:
        assert self.query_log is not None
        try:
            self.query_log.submit(entry_from_answer(out, self.log_config, source, self._redactor))
        except Exception as exc:  # logging never fails the answer
            log.warning("query log: the entry of an answer could not be built: %s: %s", type(exc).__name__, exc)
            self.metrics.query_log_failures.inc()

    def _titles(self, trace: dict[str, Any]) -> dict[str, str]:
        """Titles of every passage the trace names (retriever hits, MMR picks), for display."""
        ids = {h["id"] for r in trace.get("retrievers") or [] for h in r.get("hits", [])}
        ids |= {p["id"] for p in (trace.get("mmr") or {}).get("picks", [])}
        rows = self.engine.index.rows_for_ids(sorted(ids))
        return {pid: title for pid, (_, title) in zip(rows, self.engine.index.describe_rows(list(rows.values())),
                                                       strict=True)}

    def document(self, pid: str) -> dict[str, Any] | None:
        with self.lock.read():
            p = self.engine.index.get(pid)
        return None if p is None else self._passage_dict(p, full=True)

    def _cite(self, passages: list[dict[str, Any]]) -> None:
        """Each retrieved passage's `citation` (file, page, section, offsets, `url`; None for one without a file)."""
        for d in passages:
            p = self.engine.index.get(d["id"])  # None for an external source's passage
            d["citation"] = self._citation(p) if p is not None else None

    def _citation(self, p: Passage) -> dict[str, Any] | None:
        """The passage's citation and its `url`: where this service serves its file (at its page), else None."""
        citation = citation_of(p.metadata)
        if citation is not None:
            citation["url"] = self.sources.url(p.doc_id, p.metadata)
        return citation

    def _passage_dict(self, p: Passage, full: bool = False) -> dict[str, Any]:
        d: dict[str, Any] = {"id": p.id, "title": p.title, "text": p.text, "citation": self._citation(p)}
        if full:
            d.update(doc_id=p.doc_id, metadata=p.metadata)
        return d

    def source_file(self, name: str, rel: str) -> Path | None:
        """The file `GET /v1/sources/NAME/PATH` serves: inside the served root NAME and a document of the index
        (`NAME/PATH`), else None."""
        path = self.sources.resolve(name, rel)
        if path is None:
            return None
        key = f"{name}/{rel}"
        with self.lock.read():
            held = key in self.engine.index.documents(prefix=key)
        return path if held else None

    def describe(self) -> dict[str, Any]:
        cfg = self.engine.config
        index = self.engine.index
        return {
            "version": __version__,
            "index": {"passages": len(index), "backend": getattr(index, "backend", ""),
                      "generation": (getattr(index, "manifest", None) or {}).get("generation")},
            "router": {"theta_low": cfg.router.theta_low, "theta_high": cfg.router.theta_high},
            "fusion": {"kappa": cfg.fusion.kappa, "alpha0": cfg.fusion.alpha0, "rrf_k": cfg.fusion.rrf_k},
            "systems": list(SYSTEMS),
            "default_system": "full",
            "review": {"enabled": self.review_queue is not None},
            "generator": getattr(getattr(cfg, "generator", None), "name", "extractive"),
            "limits": {"max_question_chars": self.config.max_question_chars, "max_k": self.config.max_k,
                       "max_body_bytes": self.config.max_body_bytes,
                       "max_passages_per_request": self.config.max_passages_per_request,
                       "job_threshold": self.config.job_threshold,
                       "request_timeout_s": self.config.request_timeout_s},
        }

    # ------------------------------------------------------------------ writes
    def parse_passages(self, records: list[Any]) -> list[Passage]:
        if not records:
            raise InputError("`passages` is empty: give at least one passage")
        if len(records) > self.config.max_passages_per_request:
            raise InputError(f"{len(records)} passages in one request; the limit is "
                             f"{self.config.max_passages_per_request}: split the batch")
        passages = [passage_from_record(r, f"passages[{i}]") for i, r in enumerate(records)]
        seen: dict[str, int] = {}
        for i, p in enumerate(passages):
            if p.id in seen:
                raise InputError(f"duplicate passage id {p.id!r} at passages[{seen[p.id]}] and passages[{i}]; "
                                 f"nothing was added")
            seen[p.id] = i
        return passages

    def add(self, passages: list[Passage], progress: Progress | None = None) -> dict[str, Any]:
        """Runs on the writer thread; `progress` gets the index's steps (a background job's status shows them)."""
        with self.lock.write():
            report = self.engine.index.add(passages, progress=progress)
            self._after_write()
        return {"received": report.received, "added": report.added, "skipped_existing": report.skipped_existing,
                "skipped_duplicate_content": report.skipped_duplicate_content,
                "passages": len(self.engine.index), "seconds": {k: round(v, 3) for k, v in report.seconds.items()}}

    def parse_document(self, doc_id: str, text: str | None, fmt: str, title: str, records: list[Any] | None,
                       metadata: dict[str, Any] | None) -> Document:
        """The document of a PUT body: its `text` chunked with the index's settings, or its `passages`."""
        from amsrag.ingest.documents import text_document
        from amsrag.ingest.readers import check_id, check_text

        doc_id = doc_id.strip()
        if not doc_id:
            raise InputError("the document id is empty")
        check_id(doc_id, "the document id")
        check_text(title, "`title`")
        if text is not None:
            check_text(text, "`text`")
        if (text is None) == (records is None):
            raise InputError("give the document as `text` or as `passages` (one of the two)")
        if records is not None:
            if not records:
                raise InputError("`passages` is empty: give at least one passage, or DELETE the document")
            records = [r if not isinstance(r, dict) or "id" in r else {**r, "id": f"{doc_id}#{i}"}
                       for i, r in enumerate(records)]
            passages = self.parse_passages(records)
        else:
            assert text is not None
            if len(text) > self.config.max_body_bytes:
                raise InputError(f"`text` is {len(text)} characters; the body limit is {self.config.max_body_bytes}")
            passages = text_document(doc_id, text, fmt, title, self.engine.index.config.chunking,
                                     metadata=metadata)
            if not passages:
                raise InputError(f"document {doc_id!r} has no text once headings are set aside")
        return Document.of(doc_id, passages, source="api")

    def put(self, document: Document) -> dict[str, Any]:
        """Runs on the writer thread."""
        with self.lock.write():
            report = self.engine.index.put_documents([document])
            self._after_write()
        return {"doc_id": document.doc_id, "created": bool(report.created), "unchanged": bool(report.unchanged),
                "added": report.added, "removed": report.removed, "kept": report.kept,
                "embedded": report.embedded, "skipped_duplicate_content": report.skipped_duplicate_content,
                "passages": len(self.engine.index)}

    def delete_document(self, doc_id: str) -> dict[str, Any] | None:
        """Runs on the writer thread; None when the index holds no such document."""
        with self.lock.write():
            if doc_id not in self.engine.index.documents(prefix=doc_id):
                return None
            report = self.engine.index.delete_documents([doc_id])
            self._after_write()
        return {"doc_id": doc_id, "deleted": report.deleted, "passages": len(self.engine.index)}

    def delete(self, ids: list[str]) -> dict[str, Any]:
        """Runs on the writer thread."""
        with self.lock.write():
            report = self.engine.index.delete(ids)
            self._after_write()
        return {"deleted": report.deleted, "passages": len(self.engine.index)}

    # ------------------------------------------------------------------ the query library
    def parse_library_queries(self, queries: list[tuple[str, str]], source: str
                              ) -> tuple[list[str], list[str], str]:
        """(questions, hop labels, source), every query checked before anything is embedded or stored."""
        if not queries:
            raise InputError("`queries` is empty: give at least one {question, hop}")
        if len(queries) > self.config.max_passages_per_request:
            raise InputError(f"{len(queries)} queries in one request; the limit is "
                             f"{self.config.max_passages_per_request}: split the batch")
        for i, (question, hop) in enumerate(queries):
            try:
                check_question(question, self.config.max_question_chars)
            except QuestionError as exc:
                raise InputError(f"queries[{i}]: {exc}; nothing was added") from None
            if not normalise_question(question):
                raise InputError(f"queries[{i}]: the question is empty; nothing was added")
            if hop not in HOP_LABELS:
                raise InputError(f"queries[{i}]: unknown hop label {hop!r} for question {question!r}; use "
                                 f"{' or '.join(HOP_LABELS)}; nothing was added")
        if not source.strip():
            raise InputError("`source` must be a non-empty name")
        return [q for q, _ in queries], [h for _, h in queries], source

    def learn_queries(self, questions: list[str], hops: list[str], source: str) -> dict[str, Any]:
        """Runs on the writer thread: embeds under the shared lock, then adds and saves under the exclusive one."""
        index = self.engine.index
        with self.lock.read():  # in the routing models' space (MiniLM), whatever the index's encoder
            vectors = self.engine.routing_encoder.encode(questions)
        with self.lock.write():
            library = index.query_library().copy()
            report = library.add(questions, hops, vectors, source)
            if report.added or report.relabelled:
                index.save_query_library(library)
        return {"received": len(questions), **report.to_dict(), "size": len(library), "counts": library.counts()}

    def library_counts(self) -> dict[str, Any]:
        with self.lock.read():
            library = self.engine.index.query_library()
        return {"size": len(library), "counts": library.counts()}

    def refresh_if_changed(self) -> bool:
        """Pick up a write another process (e.g. `amsrag index add`) published to the index directory.
        Runs on the writer thread, so it never interleaves with this server's own writes."""
        index = self.engine.index
        if not index.stale():  # PostgreSQL reads the shared store live: never stale
            return False
        with self.lock.write():
            index.refresh()  # the index's own reload of a newer generation
            self._after_write()
        log.info("reloaded the index %s: %d passages", index.location, len(index))
        return True

    def _after_write(self) -> None:
        from amsrag.indexing.themes import refresh_themes

        refresh_themes(self.engine.index)  # the global route's themes follow the passages
        self.metrics.passages.set(len(self.engine.index))
        self._warm(with_ask=False)

    def start_add_job(self, passages: list[Passage]) -> Job:
        return self.writer.start_job("add_documents", len(passages), lambda progress: self.add(passages, progress))

    def _job_finished(self, job: Job) -> None:
        self.metrics.jobs.labels(job.status).inc()
