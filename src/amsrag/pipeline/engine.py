"""The adaptive pipeline: embed once → classify → route → retrieve (parallel) → fuse → MMR → trace.

One query embedding is computed and shared by the classifier, the dense retriever and MMR. Every
decision, score and timing goes into the trace (DESIGN §9 TRACE).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from amsrag.classify import ComplexityClassifier
from amsrag.config import AmsragConfig
from amsrag.errors import InputError
from amsrag.fuse import CARRF, RRF, FusedList, mmr
from amsrag.pipeline.execute import RetrieverExecutor, RetrieverRun
from amsrag.pipeline.systems import SystemSpec, system_spec
from amsrag.retrieve.base import check_query
from amsrag.retrieve.graph import GraphRetriever
from amsrag.route import RoutePlan, Router
from amsrag.store import EmbeddedIndex
from amsrag.types import Hit

TRACE_HITS = 20  # hits per retriever kept in the trace


@dataclass(frozen=True, slots=True)
class ScoredPassage:
    id: str
    title: str
    text: str
    score: float
    row: int


@dataclass(frozen=True, slots=True)
class RetrievalResult:
    query: str
    passages: list[ScoredPassage]
    trace: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"query": self.query,
                "passages": [{"id": p.id, "title": p.title, "text": p.text, "score": p.score} for p in self.passages],
                "trace": self.trace}


@dataclass(frozen=True, slots=True)
class AnswerResult:
    query: str
    answer: str
    citations: list[str]
    abstained: bool
    trace: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"query": self.query, "answer": self.answer, "citations": self.citations,
                "abstained": self.abstained, "trace": self.trace}


class Engine:
    """Composes the stages over one index. `generator_knows`: the generator answers from its own
    knowledge, so a confident zero_hop may skip retrieval (the extractive default cannot)."""

    def __init__(self, index: EmbeddedIndex, classifier: ComplexityClassifier | None = None,
                 generator_knows: bool = False, config: AmsragConfig | None = None) -> None:
        self.index = index
        self.config = config or index.config  # another config: query-time settings only (router, fusion)
        self.router = Router(self.config.router)
        self.generator_knows = generator_knows
        self._classifier = classifier
        self._executor = RetrieverExecutor()

    @classmethod
    def open(cls, index_dir: str | Path) -> Engine:
        return cls(EmbeddedIndex.open(index_dir))

    def close(self) -> None:
        self._executor.close()
        self.index.close()

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def classifier(self) -> ComplexityClassifier:
        if self._classifier is None:  # shares the index's encoder: one model per process
            self._classifier = ComplexityClassifier.from_config(self.config.classifier, encoder=self.index.encoder)
        return self._classifier

    # ------------------------------------------------------------------ retrieval
    def retrieve(self, query: str, system: str = "full", k: int | None = None,
                 query_vector: np.ndarray | None = None) -> RetrievalResult:
        query = check_query(query)
        spec = system_spec(system)
        timings: dict[str, Any] = {}
        t0 = time.perf_counter()
        if query_vector is None:
            query_vector = self.index.encoder.encode_query(query)
        timings["embed"] = _ms(t0)
        complexity = None
        if spec.classifies:
            t = time.perf_counter()
            pred = self.classifier.predict(query, query_vector=query_vector)
            timings["classify"] = _ms(t)
            complexity = {"label": pred.label, "probs": dict(pred.probs), "alpha": pred.alpha}
        plan = self._plan(spec, complexity)
        k = k if k is not None else plan.k
        if k is not None and k < 1:
            raise InputError(f"k must be a positive integer, got {k}")
        runs = self._run(plan, query, query_vector)
        timings["retrieve"] = {name: round(run.ms, 3) for name, run in runs.items()}
        t = time.perf_counter()
        fused = self._fuse(spec, plan, complexity, runs)
        timings["fusion"] = _ms(t)
        t = time.perf_counter()
        chosen, mmr_trace = self._select(spec, fused, k)
        timings["mmr"] = _ms(t)
        passages = self._passages(chosen)
        timings["total"] = _ms(t0)
        trace = {
            "system": spec.name,
            "complexity": complexity,
            "strategy": plan.strategy,
            "reason": plan.reason,
            "retrievers": [{"name": r.name, "ms": round(r.ms, 3), "error": r.error,
                            "hits": [{"id": h.id, "rank": h.rank, "score": h.score} for h in r.hits[:TRACE_HITS]]}
                           for r in runs.values()],
            "retriever_calls": len(runs),
            "fusion": {"method": fused.method, "weights": fused.weights, "k": fused.k, **fused.params},
            "mmr": mmr_trace,
            "corrective": {"score": None, "action": "skipped"},
            "escalations": [],
            "generator": None,
            "timings_ms": timings,
        }
        return RetrievalResult(query, passages, trace)

    def _plan(self, spec: SystemSpec, complexity: dict[str, Any] | None) -> RoutePlan:
        cfg = self.config.router
        if not spec.adaptive:
            return RoutePlan("C" if len(spec.retrievers) > 1 else "A", spec.retrievers, complexity["label"]
                             if complexity else "", complexity["alpha"] if complexity else 1.0,
                             cfg.depth["fixed"], cfg.k["fixed"], False, f"fixed pipeline {spec.name}")
        assert complexity is not None
        label, alpha = complexity["label"], complexity["alpha"]
        if spec.label_only:  # Adaptive-RAG: the label alone decides, as if the classifier were always sure
            forced = {"zero_hop": 1.0, "one_hop": 1.0, "multi_hop": 0.0}[label]
            plan = self.router.route(label, forced, self.generator_knows)
            return RoutePlan(plan.strategy, plan.retrievers, label, alpha, plan.depth, plan.k, plan.multi_hop,
                             f"label {label} (confidence ignored)")
        return self.router.route(label, alpha, self.generator_knows)

    def _run(self, plan: RoutePlan, query: str, vector: np.ndarray) -> dict[str, RetrieverRun]:
        """Activated retrievers; the graph, when others run too, is seeded from their hits (no rerun)."""
        timeout = self.config.router.retriever_timeout_s
        names = list(plan.retrievers)
        if not names:
            return {}
        others = {n: self.index.retriever(n) for n in names if n != "graph"}
        runs = self._executor.run(others, query, plan.depth, vector, timeout) if others else {}
        if "graph" in names:
            graph = self.index.retriever("graph")
            assert isinstance(graph, GraphRetriever)
            if others:
                t = time.perf_counter()
                try:
                    hits = graph.search_seeded(query, plan.depth, [r.hits for r in runs.values()])
                    runs["graph"] = RetrieverRun("graph", hits, _ms(t))
                except Exception as exc:  # degrade, never fail the query
                    runs["graph"] = RetrieverRun("graph", [], _ms(t), f"{type(exc).__name__}: {exc}")
            else:
                runs.update(self._executor.run({"graph": graph}, query, plan.depth, vector, timeout))
        return {n: runs[n] for n in names}

    def _fuse(self, spec: SystemSpec, plan: RoutePlan, complexity: dict[str, Any] | None,
              runs: dict[str, RetrieverRun]) -> FusedList:
        lists: dict[str, list[Hit]] = {name: run.hits for name, run in runs.items()}
        if spec.fusion == "ca-rrf":
            assert complexity is not None
            return CARRF(complexity["label"], complexity["alpha"], self.config.fusion).fuse(lists)
        if spec.fusion == "rrf" or len(lists) != 1:
            return RRF(self.config.fusion.rrf_k).fuse(lists)
        return _single(lists)

    def _select(self, spec: SystemSpec, fused: FusedList, k: int) -> tuple[list, dict[str, Any] | None]:
        if not spec.mmr or len(fused) <= 1:
            return fused.top(k), None
        pool = fused.top(self.config.fusion.mmr_pool * k)
        vectors = self.index.vectors_for_rows([it.row for it in pool])
        result = mmr(pool, vectors, k, lam=self.config.fusion.mmr_lambda)
        return result.items, result.to_dict()

    def _passages(self, items: list) -> list[ScoredPassage]:
        stored = self.index.passages_by_rows([it.row for it in items])
        return [ScoredPassage(p.id, p.title, p.text, it.score, it.row) for it, p in zip(items, stored, strict=True)]

    # ------------------------------------------------------------------ answering
    def ask(self, query: str, system: str = "full") -> AnswerResult:
        """Until the generation stage lands: the evidence sentence closest to the query (extractive)."""
        result = self.retrieve(query, system)
        t = time.perf_counter()
        from amsrag.ingest import split_sentences

        candidates = [(p.id, s.strip()) for p in result.passages for s in split_sentences(p.text) if s.strip()]
        trace = dict(result.trace)
        if not candidates:
            trace["generator"] = {"name": "extractive-sentence", "prompt_tokens": 0, "output_tokens": 0,
                                  "ms": _ms(t)}
            return AnswerResult(result.query, "insufficient evidence", [], True, trace)
        qv = self.index.encoder.encode_query(result.query)
        sims = self.index.encoder.encode([s for _, s in candidates]) @ qv
        best = int(np.argmax(sims))
        trace["generator"] = {"name": "extractive-sentence", "prompt_tokens": 0, "output_tokens": 0,
                              "ms": _ms(t), "sentence_score": float(sims[best])}
        trace["timings_ms"] = {**trace["timings_ms"], "generate": _ms(t)}
        pid, sentence = candidates[best]
        return AnswerResult(result.query, sentence, [pid], False, trace)


def _single(lists: dict[str, list[Hit]]) -> FusedList:
    """One retriever's list as a FusedList (scores are the retriever's own)."""
    from amsrag.fuse import FusedItem

    (name, hits), = lists.items()
    items = [FusedItem(h.id, h.row, h.score, h.title, {name: h.rank}, {name: h.score}) for h in hits]
    return FusedList("none", items, {name: 1.0}, {})


def _ms(t: float) -> float:
    return round((time.perf_counter() - t) * 1000, 3)
