"""The answer phase of `amsrag eval`: each system's k = 5 passages read by the generator, as `Engine.ask` does.

It runs after the timed retrieval phase, so it can use both cores without touching the latencies:
`workers` > 1 starts that many processes, each opening the same index with the run's configuration
(answers do not depend on which process computes them: the generators are deterministic). Within one
process identical inputs (question, passage ids in order) are answered once. Corrective systems answer
from a retrieval with the corrective step, as `Engine.ask` does; its time, calls and action are returned.
Every answer is audited as `Engine.ask` audits it (the citation-support audit), unless the run turns it off.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from amsrag.embed.cache import CachedEncoder, shared_cache
from amsrag.generate.base import Generation, generate_answer
from amsrag.indexes.allowed_rows import AllowedRows
from amsrag.pipeline.trace import AuditTrace
from amsrag.retrieve.filtered import scope
from amsrag.types import Passage

CHUNK = 10  # queries per task sent to a worker process
CHUNK_TIMEOUT_S = 1800.0  # a chunk that takes longer than this means a stuck worker: fail the run


@dataclass(slots=True)
class Answer:
    text: str
    abstained: bool
    ms: float
    candidate: str = ""  # what it would have answered had it not abstained
    generation: Generation | None = None  # the generator's output (what the audit reads)


def candidate_of(g: Any) -> str:
    """The generator's best answer even when it abstained (the span reader keeps it in its details)."""
    return str(g.details.get("candidate") or g.answer) if g.abstained else str(g.answer)


class Answerer:
    """One generator object; identical inputs (question, passage ids in order) are answered once."""

    mode = "generator on each system's retrieved passages"

    def __init__(self, generator: Any, name: str | None = None) -> None:
        self.generator = generator
        self.generator_name = name  # what `make_generator` was asked for (None: the index's configured one)
        self.name = str(getattr(generator, "name", type(generator).__name__))
        self.knows = bool(getattr(generator, "knows", False))
        self._cache: dict[tuple[str, tuple[str, ...]], Answer] = {}
        self.encoder: CachedEncoder | None = None
        self.cache_file: Path | None = None

    def save(self) -> None:
        """Persist the sentence vectors so a rerun of the eval embeds only new sentences."""
        if self.encoder is not None and self.cache_file is not None:
            self.encoder.save(self.cache_file)

    def answer(self, question: str, vector: np.ndarray, passages: Sequence) -> Answer:
        key = (question, tuple(p.id for p in passages))
        hit = self._cache.get(key)
        if hit is None:
            t = time.perf_counter()
            g = generate_answer(self.generator, question, passages, vector)
            hit = self._cache[key] = Answer(g.answer, bool(g.abstained), (time.perf_counter() - t) * 1000,
                                            candidate_of(g), g)
        return hit


def make_answerer(index: Any, name: str | None, cache_file: Path | None = None) -> Answerer:
    """The generator `name` (default: the index's configured one) over the process's sentence cache of the
    index's encoder (shared with the corrective step), loaded from and saved to `cache_file`."""
    from amsrag.generate import make_generator

    encoder = shared_cache(index.encoder)
    if cache_file is not None:
        encoder.load(cache_file)
    answerer = Answerer(make_generator(index.config, encoder, name=name), name)
    answerer.encoder, answerer.cache_file = encoder, cache_file
    return answerer


# ---------------------------------------------------------------- jobs


@dataclass(frozen=True, slots=True)
class AnswerJob:
    """One query's answers to compute: per system row, the ids of its k = 5 retrieved passages and whether
    the row routed the question as multi-hop (None: no route, as for a fixed pipeline)."""

    position: int  # the query's index in the run
    question: str
    vector: np.ndarray
    rows: tuple[tuple[str, tuple[str, ...], bool | None], ...]  # (row name, passage ids, routed multi-hop)
    passages: dict[str, tuple[str, str]]  # id -> (title, text) of every passage named in `rows`


@dataclass(frozen=True, slots=True)
class RowAnswer:
    text: str
    abstained: bool
    ms: float
    corrective: tuple[float, float, str] | None = None  # (retrieve ms, retriever calls, action) when it ran
    candidate: str = ""
    support: float | None = None  # the audit's citation support (None: not audited)
    flagged: bool | None = None  # the audit flagged the answer (None: not audited)
    citations: tuple[str, ...] = ()
    plan: str = ""  # the decomposer's plan type (rows that compose)
    chain: dict[str, Any] | None = None  # the chain's trace (`ChainTrace.to_dict`)
    confidence: float | None = None  # the generator's confidence in `candidate`, when it gives one


def audited(row: RowAnswer, audit: AuditTrace) -> RowAnswer:
    """`row` with the verdict of `audit` (unchanged when no audit ran)."""
    if audit.verdict is None:
        return row
    return replace(row, support=audit.verdict.support, flagged=audit.verdict.flagged)


class AnswerContext:
    """What answering needs in one process: an engine per row (with its thresholds), the answerer, and
    whether to audit the answers."""

    def __init__(self, engines: dict[str, Any], corrective_rows: dict[str, str], answerer: Answerer,
                 k: int, audit: bool = True) -> None:
        self.engines = engines
        self.corrective_rows = corrective_rows  # row name -> Engine system name, for rows with the corrective step
        self.answerer = answerer
        self.k = k
        self.audit = audit
        # the rows' engines differ only in router thresholds: one audits every fixed-passage answer
        self._auditing = next(iter(engines.values()), None)
        self._audits: dict[tuple[str, tuple[str, ...], bool | None], AuditTrace] = {}

    def _audit_read(self, question: str, a: Answer, passages: Sequence[Any], multi_hop: bool | None) -> AuditTrace:
        key = (question, tuple(p.id for p in passages), multi_hop)
        hit = self._audits.get(key)
        if hit is None:
            if a.generation is None or self._auditing is None:
                return AuditTrace(reason="no generation to audit")
            hit = self._audits[key] = self._auditing.audit_answer(question, a.generation, passages, multi_hop,
                                                                  self.answerer.generator)
        return hit

    def run(self, job: AnswerJob) -> dict[str, RowAnswer]:
        out: dict[str, RowAnswer] = {}
        for name, ids, multi_hop in job.rows:
            passages: Sequence[Any] = [Passage(id=pid, title=title, text=text)
                                       for pid, (title, text) in ((i, job.passages[i]) for i in ids)]
            system = self.corrective_rows.get(name)
            if system is not None:  # as `Engine.ask`: the corrective step (or a confident reader) before the answer
                answered = self.engines[name].answer(job.question, system, self.answerer.generator, job.vector,
                                                     k=self.k)
                trace, g = answered.retrieval.trace, answered.generation
                corrective = (float(trace.timings["total"]), float(trace.retriever_calls), trace.corrective.action)
                chain = trace.chain
                row = RowAnswer(g.answer, bool(g.abstained), answered.generate_ms, corrective, candidate_of(g),
                                citations=tuple(g.citations), plan=chain.plan.kind if chain is not None else "",
                                chain=chain.to_dict() if chain is not None else None, confidence=g.confidence)
                out[name] = audited(row, self.engines[name].audit(answered, self.answerer.generator)) \
                    if self.audit else row
                continue
            a = self.answerer.answer(job.question, job.vector, passages)
            g_ = a.generation
            row = RowAnswer(a.text, a.abstained, a.ms, candidate=a.candidate,
                            citations=tuple(g_.citations) if g_ is not None else (),
                            confidence=g_.confidence if g_ is not None else None)
            out[name] = audited(row, self._audit_read(job.question, a, passages, multi_hop)) if self.audit else row
        return out


# ---------------------------------------------------------------- worker processes

_WORKER: AnswerContext | None = None
_ALLOWED: AllowedRows | None = None  # the rows the run's filter allows, in this worker's index


@dataclass(frozen=True, slots=True)
class WorkerSpec:
    """How a worker process rebuilds the run's context (all picklable)."""

    index: str  # index directory
    config: dict[str, Any]  # the run's AmsragConfig (tuned thresholds, corrective on/off)
    generator_knows: bool
    rows: tuple[tuple[str, str, tuple[float, float] | None], ...]  # (name, system, thresholds)
    corrective_rows: dict[str, str]
    generator: str | None
    cache_file: str | None
    k: int
    audit: bool = True
    where: dict[str, Any] | None = None  # the run's metadata filter (`Where.to_dict`): answers keep to it


def _init_worker(spec: WorkerSpec) -> None:
    global _WORKER, _ALLOWED
    from amsrag.config import AmsragConfig
    from amsrag.evaluate.systems import SystemRow, engine_for
    from amsrag.filters import Where
    from amsrag.pipeline import Engine

    engine = Engine.open(spec.index, config=AmsragConfig.model_validate(spec.config),
                         generator_knows=spec.generator_knows)
    engines = {name: engine_for(engine, SystemRow(name, system, thresholds))
               for name, system, thresholds in spec.rows}
    answerer = make_answerer(engine.index, spec.generator, Path(spec.cache_file) if spec.cache_file else None)
    _WORKER = AnswerContext(engines, spec.corrective_rows, answerer, spec.k, spec.audit)
    _ALLOWED = engine.index.allowed_rows(Where.from_json(spec.where)) if spec.where else None


def _work(jobs: list[AnswerJob]) -> tuple[list[dict[str, RowAnswer]], tuple[list[str], np.ndarray]]:
    """A chunk of queries in a worker, with the sentence vectors it embedded (the parent keeps them)."""
    assert _WORKER is not None, "worker not initialised"
    with scope(_ALLOWED):  # a corrective row retrieves again: within the run's filter, as in the parent
        answers = [_WORKER.run(job) for job in jobs]
    return answers, _WORKER.answerer.encoder.take_new()  # type: ignore[union-attr]


def answer_all(jobs: Sequence[AnswerJob], context: AnswerContext, workers: int = 1,
               spec: WorkerSpec | None = None, advance: Callable[[int], None] | None = None
               ) -> list[dict[str, RowAnswer]]:
    """Answers of every job, in job order: in this process, or in `workers` processes when `spec` says
    how to rebuild the context there."""
    advance = advance or (lambda n: None)
    if workers <= 1 or spec is None or len(jobs) <= CHUNK:
        out = []
        for job in jobs:
            out.append(context.run(job))
            advance(1)
        return out
    import multiprocessing

    chunks = [list(jobs[i : i + CHUNK]) for i in range(0, len(jobs), CHUNK)]
    results: list[list[dict[str, RowAnswer]]] = []
    # spawn: a fork would copy onnxruntime's and the executor's threads in an unknown state
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"), initializer=_init_worker,
                             initargs=(spec,)) as pool:
        futures = [pool.submit(_work, chunk) for chunk in chunks]
        for chunk, future in zip(chunks, futures, strict=True):
            answers, (texts, vectors) = future.result(timeout=CHUNK_TIMEOUT_S)
            if context.answerer.encoder is not None and texts:
                context.answerer.encoder.add(texts, vectors)
            results.append(answers)
            advance(len(chunk))
    return [a for chunk in results for a in chunk]
