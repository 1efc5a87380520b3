"""The adaptive pipeline: embed once → classify → route → retrieve (parallel) → fuse → MMR → trace.

One query embedding is computed and shared by the classifier, the dense retriever and MMR. Every
decision, score and timing goes into the trace (DESIGN §9 TRACE).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from amsrag.classify import ComplexityClassifier
from amsrag.config import AmsragConfig
from amsrag.errors import InputError
from amsrag.fuse import CARRF, RRF, FusedList, adaptive_k, mmr
from amsrag.pipeline.execute import RetrieverExecutor, RetrieverRun
from amsrag.pipeline.multihop import expand
from amsrag.pipeline.systems import SystemSpec, system_spec
from amsrag.retrieve.base import check_query
from amsrag.retrieve.graph import GraphRetriever
from amsrag.route import RoutePlan, Router
from amsrag.route.router import retrieval_class
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
    strips: list[Any] = field(default_factory=list)  # the corrective step's sentence strips (for the generator)

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
        self._corrective = None
        self._external = None

    @classmethod
    def open(cls, index_dir: str | Path, config: AmsragConfig | None = None, **kwargs: Any) -> Engine:
        """The engine over an index directory or a postgresql:// URL; `config`: other query-time settings."""
        from amsrag.store.open import open_index

        return cls(open_index(index_dir), config=config, **kwargs)

    def close(self) -> None:
        self._executor.close()
        if self._external is not None:
            self._external.close()
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
                 query_vector: np.ndarray | None = None, corrective: bool | None = None,
                 generator_knows: bool | None = None) -> RetrievalResult:
        """Passages for `query` and the trace of how they were found. `corrective`: run the corrective
        step (systems that include it only); default: `corrective.on_retrieve` of the configuration.
        `generator_knows`: this call's generator answers from its own knowledge (default: the engine's)."""
        query = check_query(query)
        knows = self.generator_knows if generator_knows is None else generator_knows
        spec = system_spec(system)
        if k is not None and k < 1:
            raise InputError(f"k must be a positive integer, got {k}")
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
            label, alpha = retrieval_class(pred.label, pred.probs, pred.alpha, knows)
            if label != pred.label:  # what retrieval is configured by (the trace keeps both)
                complexity["route_label"], complexity["route_alpha"] = label, alpha
        plan = self._plan(spec, complexity, knows)
        first = self._pass(spec, plan, complexity, query, query_vector, k, timings)
        passages, runs = first.passages, list(first.runs.values())
        checked: dict[str, Any] = {"score": None, "action": "skipped"}
        escalations: list[dict[str, Any]] = []
        strips: list[Any] = []
        cfg = self.config.corrective
        if spec.corrective and cfg.enabled and (cfg.on_retrieve if corrective is None else corrective):
            passages, checked, escalations, strips, more = self._correct(spec, plan, complexity, query,
                                                                            query_vector, k, first, timings)
            runs += more
        timings["total"] = _ms(t0)
        trace = {
            "system": spec.name,
            "complexity": complexity,
            "strategy": plan.strategy,
            "reason": plan.reason,
            "retrievers": [{"name": r.name, "ms": round(r.ms, 3), "error": r.error,
                            "hits": [{"id": h.id, "rank": h.rank, "score": h.score} for h in r.hits[:TRACE_HITS]]}
                           for r in runs],
            "retriever_calls": len(runs),
            "searches": sum(self._searches(p.runs) for p in (first, *[e["_pass"] for e in escalations])),
            "fusion": {"method": first.fused.method, "weights": first.fused.weights, "k": first.fused.k,
                       **first.fused.params},
            "fused": [{"id": it.id, "score": it.score, "ranks": dict(it.ranks), "contributions": dict(it.contributions)}
                      for it in first.fused.top(TRACE_HITS)],
            "second_hop": first.second_hop,
            "adaptive_k": first.adaptive,
            "mmr": first.mmr,
            "corrective": checked,
            "escalations": [{k: v for k, v in e.items() if k != "_pass"} for e in escalations],
            "generator": None,
            "timings_ms": timings,
        }
        return RetrievalResult(query, passages, trace, strips)

    def _pass(self, spec: SystemSpec, plan: RoutePlan, complexity: dict[str, Any] | None, query: str,
              vector: np.ndarray, k: int | None, timings: dict[str, Any], prefix: str = "") -> _Pass:
        """One retrieval pass of `plan`: retrievers → fusion → second hop → adaptive k → MMR → passages."""
        explicit_k = k
        k = k if k is not None else plan.k
        runs = self._run(plan, query, vector)
        timings[prefix + "retrieve"] = {name: round(run.ms, 3) for name, run in runs.items()}
        t = time.perf_counter()
        fused = self._fuse(spec, plan, complexity, runs)
        timings[prefix + "fusion"] = _ms(t)
        second_hop = None
        if plan.multi_hop and len(fused):
            expansion = expand(self.index, query, fused, self.config.router.second_hop, plan.depth)
            fused, second_hop = expansion.fused, expansion.to_dict()
            timings[prefix + "second_hop"] = round(expansion.ms, 3)
        adaptive = None
        if self.config.fusion.adaptive_k and explicit_k is None and len(fused):
            f = self.config.fusion
            cut = adaptive_k(fused.scores[: f.adaptive_k_max * f.mmr_pool], f.adaptive_k_drop, f.adaptive_k_min,
                             f.adaptive_k_max)
            adaptive = {"k": cut, "drop": f.adaptive_k_drop, "min": f.adaptive_k_min, "max": f.adaptive_k_max}
            k = cut
        t = time.perf_counter()
        chosen, mmr_trace = self._select(spec, fused, k)
        timings[prefix + "mmr"] = _ms(t)
        return _Pass(plan, runs, fused, second_hop, adaptive, mmr_trace, self._passages(chosen), k)

    @property
    def corrective_step(self):
        if self._corrective is None:
            from amsrag.correct import CorrectiveStep

            self._corrective = CorrectiveStep(self.config.corrective, encoder=self.index.encoder)
        return self._corrective

    @property
    def external(self):
        """The configured external sources (falsy when none)."""
        if self._external is None:
            from amsrag.retrieve.external import ExternalSources

            self._external = ExternalSources(self.config.external)
        return self._external

    def _correct(self, spec: SystemSpec, plan: RoutePlan, complexity: dict[str, Any] | None, query: str,
                 vector: np.ndarray, k: int | None, first: _Pass, timings: dict[str, Any]):
        """DESIGN §6: assess the evidence; correct → strips; incorrect → discard, rewrite, escalate and/or
        ask the external sources; ambiguous → both. Then the sufficiency check may escalate once more."""
        cfg = self.config.corrective
        t = time.perf_counter()
        passages = first.passages
        vectors = self.index.vectors_for_rows([p.row for p in passages]) if passages else None
        correction = self.corrective_step.correct(query, vector, passages, vectors)
        timings["corrective"] = _ms(t)
        trace = correction.to_dict()
        escalations: list[dict[str, Any]] = []
        extra_runs: list[RetrieverRun] = []
        current, final = plan, first.passages
        strips = list(correction.strips)
        if correction.escalate:
            kept = [passages[i] for i in correction.kept]
            if not kept and not cfg.discard_incorrect:  # incorrect: demote rather than drop the first pass
                kept = list(passages)
            rewritten = correction.rewritten_query or query
            lists = [kept] if kept else []  # the first pass leads: a wider pass only adds what it lacks
            wider = self.router.wider(plan) if cfg.max_escalations > 0 else None
            if wider is not None:
                q2 = rewritten if cfg.rewrite_escalation else query
                qv = vector if q2 == query else self.index.encoder.encode_query(q2)
                second = self._pass(spec, wider, complexity, q2, qv, k, timings, prefix="escalated_")
                extra_runs += second.runs.values()
                lists.append(second.passages)
                escalations.append({"from": plan.strategy, "to": wider.strategy, "path": wider.evidence_path,
                                    "query": q2,
                                    "reason": f"corrective: {correction.assessment.action} "
                                              f"(S = {correction.assessment.score:.3f})", "_pass": second})
                current = wider
            external = self._external_passages(rewritten, k or plan.k, trace)
            if external:
                lists.append(external)
            final = _merge(lists, k or current.k)
            if not final:
                trace["insufficient_evidence"] = True
        if cfg.sufficiency and final:
            from amsrag.correct import check

            route_label = (complexity or {}).get("route_label", (complexity or {}).get("label", ""))
            suff = check(query, final, multi_hop=current.multi_hop or route_label == "multi_hop")
            trace["sufficiency"] = suff.to_dict()
            if not suff.ok and len(escalations) < cfg.max_escalations:
                wider = self.router.wider(current)
                if wider is not None:
                    third = self._pass(spec, wider, complexity, query, vector, k, timings, prefix="sufficiency_")
                    extra_runs += third.runs.values()
                    escalations.append({"from": current.strategy, "to": wider.strategy,
                                        "path": wider.evidence_path, "query": query,
                                        "reason": f"sufficiency: {suff.reason}"
                                                  + (f" (missing {', '.join(suff.missing)})" if suff.missing else ""),
                                        "_pass": third})
                    final = _merge([final, third.passages], k or wider.k)
        return final, trace, escalations, strips, extra_runs

    def _external_passages(self, query: str, k: int, trace: dict[str, Any]) -> list[ScoredPassage]:
        if not self.external:
            return []
        result = self.external.search(query, k)
        trace["external"] = {k: v for k, v in result.to_dict().items() if k != "passages"}
        return [ScoredPassage(p.id, p.title, p.text, p.score, -1) for p in result.passages]

    def _plan(self, spec: SystemSpec, complexity: dict[str, Any] | None, knows: bool) -> RoutePlan:
        cfg = self.config.router
        if not spec.adaptive:
            return RoutePlan("C" if len(spec.retrievers) > 1 else "A", spec.retrievers, complexity["label"]
                             if complexity else "", complexity["alpha"] if complexity else 1.0,
                             cfg.depth["fixed"], cfg.k["fixed"], False, f"fixed pipeline {spec.name}")
        assert complexity is not None
        label, alpha = _routed(complexity)
        if self.config.router.decision == "bayes" and not spec.label_only:
            return self.router.bayes_route(label, complexity["probs"], knows)
        if spec.label_only:  # Adaptive-RAG: the label alone decides, as if the classifier were always sure
            label = complexity["label"]  # zero -> none or single, one -> single, multi -> the multi-hop path
            forced = {"zero_hop": 1.0, "one_hop": 1.0, "multi_hop": 0.0}[label]
            plan = self.router.route(label, forced, knows)
            return RoutePlan(plan.strategy, plan.retrievers, label, alpha, plan.depth, plan.k, plan.multi_hop,
                             f"label {label} (confidence ignored)")
        return self.router.route(label, alpha, knows)

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

    def _searches(self, runs: dict[str, RetrieverRun]) -> int:
        """Index searches actually run: the graph alone first searches its seeders (bm25 and dense)."""
        n = len(runs)
        if set(runs) == {"graph"}:
            n += len(self.index.retriever("graph").seeders)
        return n

    def _fuse(self, spec: SystemSpec, plan: RoutePlan, complexity: dict[str, Any] | None,
              runs: dict[str, RetrieverRun]) -> FusedList:
        lists: dict[str, list[Hit]] = {name: run.hits for name, run in runs.items()}
        if not lists:  # no retrieval (a confident zero_hop for a generator with its own knowledge)
            return FusedList("none", [], {}, {})
        if spec.fusion == "ca-rrf":
            assert complexity is not None
            return CARRF(*_routed(complexity), self.config.fusion).fuse(lists)
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
    def ask(self, query: str, system: str = "full", generator: Any = None) -> AnswerResult:
        """Retrieve, check the evidence (corrective step), then answer with `generator` (an
        `amsrag.generate.Generator`; default: the configured one, built once per engine).

        A generator that answers from its own knowledge may skip retrieval twice over: the TARG gate
        (a closed-book answer whose confidence clears `generator.targ_threshold`) and a confident
        zero_hop route. A generator that fails (dead server, missing model) degrades to the extractive
        answer over the same passages, flagged in trace["generator"]["error"]."""
        from amsrag.generate import GeneratorError, make_generator
        from amsrag.generate.extractive import ExtractiveGenerator
        from amsrag.generate.targ import TargGate

        t0 = time.perf_counter()
        query = check_query(query)
        if generator is None:
            if getattr(self, "_generator", None) is None:
                self._generator = make_generator(self.config.generator, self.index.encoder)
            generator = self._generator
        knows = bool(getattr(generator, "knows", False))
        gate = TargGate(generator, self.config.generator.targ_threshold)
        if system_spec(system).adaptive and gate.active:
            t = time.perf_counter()
            skip, confidence, closed = gate.decide(query)
            targ = {"confidence": confidence, "threshold": gate.threshold, "fired": skip, "ms": _ms(t)}
            if skip and closed is not None:
                return self._closed_book_answer(query, system, closed, targ, t0)
        else:
            targ = None
        qv = self.index.encoder.encode_query(query)
        embed_ms = _ms(t0)
        result = self.retrieve(query, system, query_vector=qv, corrective=True,  # evidence checked first
                               generator_knows=knows or self.generator_knows)
        t = time.perf_counter()
        error = None
        try:
            if not result.passages and knows and result.trace["strategy"] == "none":
                g = generator.closed_book(query)  # a confident zero_hop: answer from the model's own knowledge
            elif isinstance(generator, ExtractiveGenerator):
                g = generator.generate(query, result.passages, query_vector=qv)
            else:
                g = generator.generate(query, result.passages)
        except GeneratorError as exc:
            error = str(exc)
            fallback = ExtractiveGenerator(self.index.encoder, self.config.generator)
            g = fallback.generate(query, result.passages, query_vector=qv)
        trace = dict(result.trace)
        trace["generator"] = g.trace()
        if targ is not None:
            trace["targ"] = targ
        if error is not None:
            trace["generator"].update({"requested": generator.name, "error": error, "fallback": "extractive"})
        timings = dict(trace["timings_ms"])
        timings["embed"] = embed_ms
        timings["generate"] = _ms(t)
        timings["total"] = _ms(t0)
        trace["timings_ms"] = timings
        return AnswerResult(result.query, g.answer, list(g.citations), g.abstained, trace)

    def _closed_book_answer(self, query: str, system: str, g: Any, targ: dict[str, Any], t0: float) -> AnswerResult:
        """The TARG gate fired: the closed-book answer stands, no retrieval ran."""
        trace = {"system": system, "complexity": None, "strategy": "none",
                 "reason": f"TARG: closed-book confidence {targ['confidence']:.3f} >= {targ['threshold']}",
                 "retrievers": [], "retriever_calls": 0, "searches": 0,
                 "fusion": {"method": "none", "weights": {}, "k": {}}, "fused": [], "second_hop": None,
                 "adaptive_k": None, "mmr": None, "corrective": {"score": None, "action": "skipped"},
                 "escalations": [], "generator": g.trace(), "targ": targ,
                 "timings_ms": {"embed": 0.0, "retrieve": {}, "fusion": 0.0, "mmr": 0.0, "targ": targ["ms"],
                                "total": _ms(t0)}}
        return AnswerResult(query, g.answer, [], g.abstained, trace)


@dataclass(slots=True)
class _Pass:
    plan: RoutePlan
    runs: dict[str, RetrieverRun]
    fused: FusedList
    second_hop: dict[str, Any] | None
    adaptive: dict[str, Any] | None
    mmr: dict[str, Any] | None
    passages: list[ScoredPassage]
    k: int


def _merge(lists: list[list[ScoredPassage]], k: int, rrf_k: float = 60.0) -> list[ScoredPassage]:
    """RRF over passage lists (kept evidence, escalated pass, external results), first seen wins ties."""
    scores: dict[str, float] = {}
    first: dict[str, ScoredPassage] = {}
    for passages in lists:
        for rank, p in enumerate(passages, 1):
            scores[p.id] = scores.get(p.id, 0.0) + 1.0 / (rrf_k + rank)
            first.setdefault(p.id, p)
    order = sorted(scores, key=lambda pid: (-scores[pid], pid))[:k]
    return [ScoredPassage(pid, first[pid].title, first[pid].text, scores[pid], first[pid].row) for pid in order]


def _routed(complexity: dict[str, Any]) -> tuple[str, float]:
    return complexity.get("route_label", complexity["label"]), complexity.get("route_alpha", complexity["alpha"])


def _single(lists: dict[str, list[Hit]]) -> FusedList:
    """One retriever's list as a FusedList (scores are the retriever's own)."""
    from amsrag.fuse import FusedItem

    (name, hits), = lists.items()
    items = [FusedItem(h.id, h.row, h.score, h.title, {name: h.rank}, {name: h.score}) for h in hits]
    return FusedList("none", items, {name: 1.0}, {})


def _ms(t: float) -> float:
    return round((time.perf_counter() - t) * 1000, 3)
