"""One retrieval pass of a route plan: the activated retrievers → fusion → second hop → adaptive k → MMR
→ the passages handed on (DESIGN §2, §4, §5)."""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Protocol, runtime_checkable

import numpy as np

from amsrag.config import AmsragConfig, FusionConfig
from amsrag.embed.encoder import MINILM_MODEL
from amsrag.fuse import CARRF, RRF, FusedItem, FusedList, MMRGate, MMRResult, adaptive_k, mmr, mmr_applies, redundancy
from amsrag.fuse.experts import ExpertFuser, ExpertMemory, load_memory
from amsrag.fuse.features import HOP_LIST, QueryInputs
from amsrag.fuse.learned import LearnedFuser, LearnedRanker
from amsrag.pipeline.context import QueryContext, ms_since
from amsrag.pipeline.execute import RetrieverExecutor, RetrieverRun
from amsrag.pipeline.multihop import Expansion, expand
from amsrag.pipeline.scored import ScoredPassage
from amsrag.pipeline.signals import IndexSignals, index_profile
from amsrag.pipeline.systems import SystemSpec
from amsrag.pipeline.trace import AdaptiveKTrace, ComplexityTrace
from amsrag.retrieve.base import Retriever
from amsrag.retrievers import retriever_for, scoped_retriever
from amsrag.route import RoutePlan
from amsrag.store.base import PassageIndex
from amsrag.types import Hit


@runtime_checkable
class SeededRetriever(Protocol):
    """A retriever that walks from other retrievers' hits (the entity graph). When those retrievers run in
    the same pass it is seeded from their lists instead of running them again."""

    name: str
    seeders: list[Retriever]

    def search(self, query: str, k: int = 10, query_vector: np.ndarray | None = None) -> list[Hit]: ...

    def search_seeded(self, query: str, k: int, seed_hits: Iterable[list[Hit]]) -> list[Hit]: ...


@dataclass(frozen=True, slots=True)
class Pass:
    """What one pass produced: each retriever's run, the fused list (after the second hop), the
    adaptive cut and the MMR picks, the passages, and how many index searches it took."""

    plan: RoutePlan
    runs: dict[str, RetrieverRun]
    fused: FusedList
    second_hop: Expansion | None
    adaptive: AdaptiveKTrace | None
    mmr: MMRResult | None
    passages: list[ScoredPassage]
    k: int
    searches: int


def single_list(lists: dict[str, list[Hit]]) -> FusedList:
    """One retriever's list as a FusedList (scores are the retriever's own)."""
    (name, hits), = lists.items()
    items = [FusedItem(h.id, h.row, h.score, h.title, {name: h.rank}, {name: h.score}) for h in hits]
    return FusedList("none", items, {name: 1.0}, {})


def fuse_runs(spec: SystemSpec, complexity: ComplexityTrace | None, runs: dict[str, RetrieverRun],
              config: AmsragConfig, experts: ExpertMemory | None = None,
              vector: np.ndarray | None = None, learned_base: FusionConfig | None = None) -> FusedList:
    """The system's fusion of the runs' lists: CA-RRF on the routed class and confidence (for the learned
    reranker, CA-RRF with the settings it was trained on, `learned_base`: the base it reorders later), expert
    weights, RRF, or one list as is."""
    lists: dict[str, list[Hit]] = {name: run.hits for name, run in runs.items()}
    if not lists:  # no retrieval (a confident zero_hop for a generator with its own knowledge)
        return FusedList("none", [], {}, {})
    if spec.fusion in ("ca-rrf", "learned", "experts"):
        if complexity is None:
            raise ValueError(f"system {spec.name!r} fuses by {spec.fusion} but the query was not classified")
        if spec.fusion == "experts":
            if experts is None or vector is None:
                raise ValueError(f"system {spec.name!r} fuses by expert weights: give the memory and query vector")
            return ExpertFuser(experts, vector, complexity.routed[0], config.fusion).fuse(lists)
        if spec.fusion == "learned":
            if learned_base is None:
                raise ValueError(f"system {spec.name!r} reranks a CA-RRF base: give the settings it was trained on")
            return CARRF(*complexity.routed, learned_base).fuse(lists)
        return CARRF(*complexity.routed, config.fusion).fuse(lists)
    if spec.fusion == "rrf" or len(lists) != 1:
        return RRF(config.fusion.rrf_k).fuse(lists)
    return single_list(lists)


class RetrievalPass:
    """Runs passes over one index; configured once per engine."""

    def __init__(self, index: PassageIndex, config: AmsragConfig, executor: RetrieverExecutor) -> None:
        self.index = index
        self.config = config
        self.executor = executor
        self._learned: tuple[LearnedRanker, IndexSignals] | None = None
        self._memory: ExpertMemory | None = None

    @property
    def learned(self) -> tuple[LearnedRanker, IndexSignals]:
        """The learned fuser (config fusion.learned, else the shipped one), loaded and checked against the
        index on first use, and what its features read from the index."""
        if self._learned is None:
            ranker = LearnedRanker.load(self.config.fusion.learned or None)
            if self.index.config.embedding.model == MINILM_MODEL:  # else only its CA-RRF base is used
                ranker.check_index(index_profile(self.index), self.index.location)
            self._learned = (ranker, IndexSignals(self.index))
        return self._learned

    @property
    def ranker(self) -> LearnedRanker:
        return self.learned[0]

    @property
    def memory(self) -> ExpertMemory:
        if self._memory is None:
            ranker = self.ranker
            self._memory = load_memory(ranker.directory, ranker.card)
        return self._memory

    def run(self, ctx: QueryContext, plan: RoutePlan, prefix: str = "") -> Pass:
        """One pass of `plan` for `ctx`; the stages' times go into `ctx.timings` under `prefix`."""
        spec, complexity, timings = ctx.spec, ctx.complexity, ctx.timings
        k = ctx.k if ctx.k is not None else plan.k
        runs = self.retrieve(plan, ctx.question, ctx.vector)
        timings[prefix + "retrieve"] = {name: round(run.ms, 3) for name, run in runs.items()}
        t = time.perf_counter()
        fused = fuse_runs(spec, complexity, runs, self.config, self.memory if spec.fusion == "experts" else None,
                          ctx.vector, self.ranker.base_fusion if spec.fusion == "learned" else None)
        timings[prefix + "fusion"] = ms_since(t)
        second_hop = None
        if plan.multi_hop and len(fused):
            second_hop = expand(self.index, ctx.question, fused, self.config.router.second_hop, plan.depth)
            fused = second_hop.fused
            timings[prefix + "second_hop"] = round(second_hop.ms, 3)
        # The shipped reranker reads MiniLM features: on an index with another encoder its CA-RRF base stands.
        if spec.fusion == "learned" and len(fused) and self.index.config.embedding.model == MINILM_MODEL:
            t = time.perf_counter()
            fused = self.rerank(ctx, runs, fused, second_hop)
            timings[prefix + "rerank"] = ms_since(t)
        adaptive = None
        f = self.config.fusion
        if f.adaptive_k and ctx.k is None and len(fused):
            cut = adaptive_k(fused.scores[: f.adaptive_k_max * f.mmr_pool], f.adaptive_k_drop, f.adaptive_k_min,
                             f.adaptive_k_max)
            adaptive = AdaptiveKTrace(cut, f.adaptive_k_drop, f.adaptive_k_min, f.adaptive_k_max)
            k = cut
        t = time.perf_counter()
        chosen, picks = self.select(spec, fused, k)
        timings[prefix + "mmr"] = ms_since(t)
        return Pass(plan, runs, fused, second_hop, adaptive, picks, self.passages(chosen), k, self.searches(runs))

    def rerank(self, ctx: QueryContext, runs: dict[str, RetrieverRun], base: FusedList,
               second_hop: Expansion | None) -> FusedList:
        """The learned reranker over `base` (the CA-RRF fusion, after the second hop); it traces the top feature
        contributions of `ctx.explain` leading passages."""
        ranker, signals = self.learned
        complexity = ctx.complexity
        probs = complexity.probs if complexity is not None else {}
        alpha = complexity.routed[1] if complexity is not None else 1.0
        inputs = QueryInputs(ctx.question, ctx.vector, float(probs.get("multi_hop", 0.0)),
                             float(probs.get("zero_hop", 0.0)), float(alpha))
        lists: dict[str, list[Hit]] = {name: run.hits for name, run in runs.items()}
        if second_hop is not None:
            lists[HOP_LIST] = second_hop.hits
        return LearnedFuser(ranker, base, inputs, signals, ctx.explain).fuse(lists)

    def retrieve(self, plan: RoutePlan, query: str, vector: np.ndarray) -> dict[str, RetrieverRun]:
        """The activated retrievers under the router's timeout. A seeded retriever (the graph), when others
        run too, is seeded from their hits rather than searching them again."""
        timeout = self.config.router.retriever_timeout_s
        names = list(plan.retrievers)
        if not names:
            return {}
        retrievers = {n: scoped_retriever(self.index, n) for n in names}
        seeded = {n: r for n, r in retrievers.items() if isinstance(r, SeededRetriever)}
        others = {n: r for n, r in retrievers.items() if n not in seeded}
        runs = self.executor.run(others, query, plan.depth, vector, timeout) if others else {}
        for name, retriever in seeded.items():
            if not others:
                runs.update(self.executor.run({name: retriever}, query, plan.depth, vector, timeout))
                continue
            t = time.perf_counter()
            try:
                hits = retriever.search_seeded(query, plan.depth, [runs[n].hits for n in others])
                runs[name] = RetrieverRun(name, hits, ms_since(t))
            except Exception as exc:  # degrade, never fail the query
                runs[name] = RetrieverRun(name, [], ms_since(t), f"{type(exc).__name__}: {exc}")
        return {n: runs[n] for n in names}

    def searches(self, runs: dict[str, RetrieverRun]) -> int:
        """Index searches actually run: a seeded retriever alone first searches its own seeders."""
        n = len(runs)
        if len(runs) == 1:
            (name,) = runs
            retriever = retriever_for(self.index, name)
            if isinstance(retriever, SeededRetriever):
                n += len(retriever.seeders)
        return n

    def select(self, spec: SystemSpec, fused: FusedList, k: int) -> tuple[list[FusedItem], MMRResult | None]:
        """The top k, diversified by MMR for systems that use it when the gate lets it run (the result
        records the gate's decision; without picks when MMR did not run)."""
        if not spec.mmr or len(fused) <= 1:
            return fused.top(k), None
        f = self.config.fusion
        if f.mmr_gate == "off":
            return fused.top(k), MMRResult([], f.mmr_lambda, MMRGate("off", False, None, f.mmr_redundancy))
        pool = fused.top(f.mmr_pool * k)
        vectors = self.index.vectors_for_rows([it.row for it in pool])
        red = redundancy(vectors[:k])
        gate = MMRGate(f.mmr_gate, mmr_applies(f.mmr_gate, red, f.mmr_redundancy), red, f.mmr_redundancy)
        if not gate.applied:
            return fused.top(k), MMRResult([], f.mmr_lambda, gate)
        result = mmr(pool, vectors, k, lam=f.mmr_lambda)
        return result.items, replace(result, gate=gate)

    def passages(self, items: list[FusedItem]) -> list[ScoredPassage]:
        stored = self.index.passages_by_rows([it.row for it in items])
        return [ScoredPassage(p.id, p.title, p.text, it.score, it.row, p) for it, p in zip(items, stored, strict=True)]
