"""Every system in one run over the same index and queries (DESIGN §7).

Per query, the query embedding is computed once (its time measured and charged to every system that
uses it: all but `bm25`); each system then retrieves k = 5 passages with that vector. Retrieval latency
= embedding + the trace's total (classification, retrievers, fusion, MMR). MRR@10 comes from the same
system asked for k = 10 (a second, untimed call for MMR systems, whose choice depends on k; a prefix of
one call otherwise). The retrieval metrics are those of that k = 5 result. Answers come after the
timed phase (`evaluate.answering`, in worker processes when asked): the generator reads each system's
k = 5 passages, or, for a system with the corrective step, the passages of a retrieval with it, as
`Engine.ask` does.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from amsrag.errors import InputError
from amsrag.evaluate.answering import AnswerContext, Answerer, AnswerJob, WorkerSpec, answer_all
from amsrag.evaluate.builder import EvalQuery
from amsrag.evaluate.metrics import METRICS, query_metrics
from amsrag.evaluate.systems import SystemRow, engine_for
from amsrag.pipeline import Engine
from amsrag.pipeline.systems import system_spec
from amsrag.pipeline.trace import Trace
from amsrag.progress import NullProgress, Progress
from amsrag.retrieve.filtered import current_scope

K = 5
MRR_K = 10


# ---------------------------------------------------------------- the run


@dataclass(slots=True)
class SystemResult:
    row: SystemRow
    values: dict[str, np.ndarray]  # metric -> per-query values (NaN: not applicable)
    latency_ms: np.ndarray
    breakdown_ms: dict[str, np.ndarray]  # stage -> per-query ms (0 when the stage did not run)
    calls: np.ndarray
    strategies: list[str]
    abstained: np.ndarray  # 1.0 / 0.0, NaN where not answered
    generate_ms: np.ndarray
    answers: list[str] = field(default_factory=list)  # "" where not answered
    answer_path: dict[str, Any] = field(default_factory=dict)  # the corrective retrieval answers read (if any)
    candidate_f1: np.ndarray | None = None  # F1 of the answer it would give without abstaining (NaN: not answered)
    searches: np.ndarray | None = None  # index searches per query (a seeded retriever alone also searches its seeders)
    support: np.ndarray | None = None  # the audit's citation support per query (NaN: not audited)
    flagged: np.ndarray | None = None  # 1.0 / 0.0 the audit flagged the answer (NaN: not audited)
    details: list[dict[str, Any] | None] = field(default_factory=list)  # per query: citations, plan, chain


@dataclass(slots=True)
class RunResult:
    queries: list[EvalQuery]
    systems: dict[str, SystemResult]
    embed_ms: np.ndarray
    predictions: dict[str, Any]  # the classifier on every query: label, alpha, probs (calibrated and not)
    answer_mode: str
    generator: str
    seconds: float


def _stage_times(trace: Trace, embed_ms: float, uses_vector: bool) -> dict[str, float]:
    t = trace.timings
    out = {"embed": embed_ms if uses_vector else 0.0, "classify": float(t.get("classify", 0.0))}
    for r, ms in (t.get("retrieve") or {}).items():
        out[f"retrieve:{r}"] = float(ms)
    out["fusion"] = float(t.get("fusion", 0.0))
    out["mmr"] = float(t.get("mmr", 0.0))
    for stage, ms in t.items():  # later stages (corrective step, escalations, ...) as the trace names them
        if stage not in ("embed", "retrieve", "total") and stage not in out and isinstance(ms, int | float):
            out[stage] = float(ms)
    return out


def _routed_multi_hop(trace: Trace) -> bool | None:
    """The retrieval routed the question as multi-hop (None: no route, as for a fixed pipeline)."""
    if trace.complexity is None:
        return None
    return trace.complexity.routed[0] == "multi_hop"


def _filter_of_run() -> dict[str, list[str]] | None:
    """The metadata filter the run retrieves within (the caller's `scope`), for the answer workers."""
    allowed = current_scope()
    return None if allowed is None else allowed.where.to_dict()


def classify_all(engine: Engine, queries: Sequence[EvalQuery], vectors: np.ndarray) -> dict[str, Any]:
    from amsrag.classify.features import features_batch

    clf = engine.classifier
    feats = features_batch([q.question for q in queries])
    label, probs = clf.probabilities(vectors, feats, calibrated=True)
    label_raw, probs_raw = clf.probabilities(vectors, feats, calibrated=False)
    return {"label": label, "probs": probs, "label_uncalibrated": label_raw, "probs_uncalibrated": probs_raw}


def run(engine: Engine, queries: Sequence[EvalQuery], rows: Sequence[SystemRow],
        answerer: Answerer | None, progress: Progress | None = None,
        on_step: Callable[[], None] | None = None, answer_mask: Sequence[bool] | None = None,
        workers: int = 1, audit: bool = True) -> RunResult:
    """Every system on every query, interleaved (query by query) so machine load affects all alike; then the
    answers (untimed), in `workers` processes when the index is a directory, each audited (`audit`).
    `answer_mask`: the queries answered (EM/F1; the same for every system); default all. Called inside a
    metadata filter's `scope` (`amsrag.retrieve.filtered`), every retrieval ranks within it, the answer
    workers' too."""
    if not queries:
        raise InputError("no queries to evaluate")
    progress = progress or NullProgress()
    t_start = time.perf_counter()
    engines = {row.name: engine_for(engine, row) for row in rows}
    specs = {row.name: system_spec(row.system) for row in rows}
    for row in rows:  # warm-up: lazy loads (indexes, classifier, NER) stay out of the timings
        engines[row.name].retrieve("warm up question about a film director", system=row.system, k=K)
    encoder = engine.index.encoder
    embed_ms = np.zeros(len(queries))
    vectors = []
    with progress.task("embed queries", len(queries)) as advance:
        for i, q in enumerate(queries):
            t = time.perf_counter()
            vectors.append(encoder.encode_query(q.question))
            embed_ms[i] = (time.perf_counter() - t) * 1000
            advance(1)
    vec = np.asarray(vectors, dtype=np.float32)
    predictions = classify_all(engine, queries, vec)

    n = len(queries)
    per: dict[str, dict[str, Any]] = {
        row.name: {"values": {m: np.full(n, np.nan) for m in METRICS}, "lat": np.zeros(n), "stages": [],
                   "calls": np.zeros(n), "searches": np.zeros(n), "strategies": [], "abst": np.full(n, np.nan),
                   "gen": np.full(n, np.nan),
                   "cand_f1": np.full(n, np.nan), "support": np.full(n, np.nan), "flagged": np.full(n, np.nan),
                   "answers": [""] * n, "details": [None] * n, "ans_ms": [], "ans_calls": [], "ans_actions": []}
           for row in rows}
    takes_corrective = "corrective" in inspect.signature(engine.retrieve).parameters
    corrective_rows = {row.name: row.system for row in rows
                       if takes_corrective and getattr(specs[row.name], "corrective", False)}
    answer = list(answer_mask) if answer_mask is not None else [True] * n
    if len(answer) != n:
        raise ValueError(f"answer_mask has {len(answer)} entries for {n} queries")
    jobs: list[AnswerJob] = []
    with progress.task(f"{len(rows)} systems x {n} queries", n * len(rows)) as advance:
        for i, q in enumerate(queries):
            v = vec[i]
            job_rows: list[tuple[str, tuple[str, ...], bool | None]] = []
            job_passages: dict[str, tuple[str, str]] = {}
            for row in rows:
                eng, spec, acc = engines[row.name], specs[row.name], per[row.name]
                uses_vector = row.system != "bm25"
                if spec.mmr:
                    result = eng.retrieve(q.question, system=row.system, k=K, query_vector=v)
                    ranked10 = [p.id for p in eng.retrieve(q.question, system=row.system, k=MRR_K,
                                                           query_vector=v).passages]
                    passages = result.passages
                else:
                    result = eng.retrieve(q.question, system=row.system, k=MRR_K, query_vector=v)
                    ranked10 = [p.id for p in result.passages]
                    passages = result.passages[:K]
                stages = _stage_times(result.trace, float(embed_ms[i]), uses_vector)
                acc["stages"].append(stages)
                timings = result.trace.timings
                acc["lat"][i] = float(timings["total"]) - float(timings.get("embed", 0.0)) + stages["embed"]
                acc["calls"][i] = result.trace.retriever_calls
                acc["searches"][i] = result.trace.searches
                acc["strategies"].append(result.trace.strategy)
                ranked5 = [p.id for p in passages]
                m = query_metrics(None, q.answers, ranked5, q.gold, q.multi_gold)
                m["mrr@10"] = query_metrics(None, [], ranked10, q.gold, False)["mrr@10"]
                for key, value in m.items():
                    acc["values"][key][i] = value
                if answerer is not None and answer[i]:
                    job_rows.append((row.name, tuple(ranked5), _routed_multi_hop(result.trace)))
                    job_passages.update((p.id, (p.title, p.text)) for p in passages)
                advance(1)
            if job_rows:
                jobs.append(AnswerJob(i, q.question, v, tuple(job_rows), job_passages))
            if on_step:
                on_step()
    if answerer is not None and jobs:
        context = AnswerContext(engines, corrective_rows, answerer, K, audit)
        index_dir = getattr(engine.index, "path", None)
        spec_ = None
        if workers > 1 and index_dir is not None:
            spec_ = WorkerSpec(str(index_dir), engine.config.model_dump(mode="json"), engine.generator_knows,
                               tuple((r.name, r.system, r.thresholds) for r in rows), corrective_rows,
                               answerer.generator_name,
                               str(answerer.cache_file) if answerer.cache_file is not None else None, K, audit,
                               _filter_of_run())
        label = f"answers ({workers} processes)" if spec_ is not None else "answers"
        with progress.task(label, len(jobs)) as advance:
            answered = answer_all(jobs, context, workers, spec_, advance)
        for job, by_row in zip(jobs, answered, strict=True):
            i, q = job.position, queries[job.position]
            for name, a in by_row.items():
                acc = per[name]
                m = query_metrics(a.text, q.answers, [], (), False)
                acc["values"]["em"][i], acc["values"]["f1"][i] = m["em"], m["f1"]
                acc["abst"][i], acc["gen"][i], acc["answers"][i] = float(a.abstained), a.ms, a.text
                acc["details"][i] = {"citations": list(a.citations), "plan": a.plan, "chain": a.chain,
                                     "candidate": a.candidate, "confidence": a.confidence}
                acc["cand_f1"][i] = query_metrics(a.candidate or a.text, q.answers, [], (), False)["f1"]
                if a.support is not None:
                    acc["support"][i], acc["flagged"][i] = a.support, float(bool(a.flagged))
                if a.corrective is not None:
                    acc["ans_ms"].append(a.corrective[0])
                    acc["ans_calls"].append(a.corrective[1])
                    acc["ans_actions"].append(a.corrective[2])
    if answerer is not None:
        answerer.save()
    systems = {}
    for row in rows:
        acc = per[row.name]
        stage_names = sorted({s for st in acc["stages"] for s in st})
        breakdown = {s: np.array([st.get(s, 0.0) for st in acc["stages"]]) for s in stage_names}
        answer_path = {}
        if acc["ans_ms"]:
            from collections import Counter

            answer_path = {"n": len(acc["ans_ms"]), "retrieve_ms_mean": round(float(np.mean(acc["ans_ms"])), 3),
                           "retriever_calls_per_query": round(float(np.mean(acc["ans_calls"])), 4),
                           "corrective_actions": dict(Counter(acc["ans_actions"]))}
        systems[row.name] = SystemResult(row, acc["values"], acc["lat"], breakdown, acc["calls"],
                                         acc["strategies"], acc["abst"], acc["gen"], acc["answers"], answer_path,
                                         acc["cand_f1"], acc["searches"],
                                         acc["support"] if audit and answerer is not None else None,
                                         acc["flagged"] if audit and answerer is not None else None,
                                         acc["details"])
    return RunResult(list(queries), systems, embed_ms, predictions,
                     answerer.mode if answerer else "none", answerer.name if answerer else "",
                     time.perf_counter() - t_start)
