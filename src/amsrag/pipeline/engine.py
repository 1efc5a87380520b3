"""The adaptive pipeline: embed once → classify → route → retrieve (parallel) → fuse → MMR → corrective
check → generate, with the trace of every decision (DESIGN §2, §9).

The engine composes the stages through their Protocols: a `PassageIndex` (either backend), the
classifier, the `Router`, one `RetrievalPass` per plan, the `CorrectiveLoop` and a `Generator`. One
query embedding is computed and shared by the classifier, the dense retriever and MMR.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Literal, Self, TypeVar

import numpy as np

from amsrag.audit.signals import proxy_signals
from amsrag.classify import ComplexityClassifier
from amsrag.config import AmsragConfig
from amsrag.decompose.parts import split_parts
from amsrag.embed.encoder import Encoder, MiniLMEncoder
from amsrag.embed.factory import ROUTING_MODEL
from amsrag.errors import InputError
from amsrag.filters import Where
from amsrag.generate import (
    AbstainsBelow,
    CalibratedReader,
    Generation,
    Generator,
    GeneratorError,
    generate_answer,
    make_generator,
)
from amsrag.generate.quote import find_quote
from amsrag.generate.span_reader import SpanReaderGenerator
from amsrag.generate.targ import TargGate
from amsrag.pipeline.compose import Composer
from amsrag.pipeline.corrective import CorrectiveLoop, CorrectiveOutcome
from amsrag.pipeline.execute import RetrieverExecutor
from amsrag.pipeline.language import question_language
from amsrag.pipeline.parts import answer_parts
from amsrag.pipeline.passes import Pass, RetrievalPass, ms_since
from amsrag.pipeline.results import (
    Answered,
    AnswerResult,
    RetrievalResult,
    check_question,
    reading_evidence,
)
from amsrag.pipeline.routes import GlobalRoute, RouteAnswer, TableRoute, Taxonomy
from amsrag.pipeline.systems import SystemSpec, system_spec
from amsrag.pipeline.trace import (
    AuditTrace,
    ComplexityTrace,
    CorrectiveTrace,
    ReaderCheck,
    TargTrace,
    Timings,
    Trace,
)
from amsrag.retrieve.external import ExternalSources
from amsrag.retrieve.filtered import AllowedRows, current_scope, scope
from amsrag.route import RoutePlan, Router
from amsrag.route.router import retrieval_class
from amsrag.route.taxonomy import TaxonomyDecision
from amsrag.store.base import QueryIndex, Store
from amsrag.text.language import is_chinese

if TYPE_CHECKING:
    from amsrag.audit import SupportAuditor

ROUTING_VECTORS_KEPT = 64  # routing encodings kept per engine (`Engine.routing_vector`)


@dataclass(frozen=True, slots=True)
class _SideDecision:
    """A query the five-way decision sent down the text path: its classification and why it went there."""

    complexity: ComplexityTrace
    decision: TaxonomyDecision
    timings: Timings = field(default_factory=dict)
    structured: dict[str, Any] | None = None  # the table route tried and fell back
    global_search: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class _FirstPass:
    """One query's first retrieval pass, before the corrective step, with what the step needs."""

    query: str
    spec: SystemSpec
    k: int | None
    vector: np.ndarray
    complexity: ComplexityTrace | None
    plan: RoutePlan
    first: Pass
    timings: Timings
    t0: float
    side: _SideDecision | None = None  # the five-way decision that sent the query down the text path

    def _with_side(self, trace: Trace) -> Trace:
        if self.side is None:
            return trace
        return replace(trace, taxonomy=self.side.decision, structured=self.side.structured,
                       global_search=self.side.global_search)

    def result(self, outcome: CorrectiveOutcome | None = None, timings: Timings | None = None,
               reader: ReaderCheck | None = None) -> RetrievalResult:
        """The retrieval result: the first pass alone, or after the corrective step's `outcome`."""
        first = self.first
        checked = outcome.trace if outcome is not None else CorrectiveTrace(reader=reader)
        every: tuple[Pass, ...] = (first, *(outcome.passes if outcome is not None else ()))
        trace = Trace(system=self.spec.name, complexity=self.complexity, strategy=self.plan.strategy,
                      reason=self.plan.reason, runs=tuple(run for p in every for run in p.runs.values()),
                      run_passes=tuple(i for i, p in enumerate(every) for _ in p.runs),
                      searches=sum(p.searches for p in every), fusion=first.fused, second_hop=first.second_hop,
                      adaptive_k=first.adaptive, mmr=first.mmr, corrective=checked,
                      escalations=outcome.escalations if outcome is not None else (),
                      timings=timings if timings is not None else dict(self.timings))
        trace = self._with_side(trace)
        if outcome is None:
            return RetrievalResult(self.query, first.passages, trace)
        return RetrievalResult(self.query, outcome.passages, trace, outcome.strips)


class _Reading:
    """One query's generator calls inside `Engine.answer`: timed, with the extractive fallback."""

    def __init__(self, engine: Engine[Any], generator: Generator, query: str, vector: np.ndarray, knows: bool) -> None:
        self.engine, self.generator, self.query, self.vector, self.knows = engine, generator, query, vector, knows
        self.strips = engine.config.generator.read_strips
        self.ms = 0.0
        self.error: str | None = None

    def evidence_ids(self, result: RetrievalResult) -> list[tuple[str, str]]:
        return [(p.id, p.text) for p in reading_evidence(result, self.strips)]

    def read(self, result: RetrievalResult) -> Generation:
        t = time.perf_counter()
        try:
            if not result.passages and self.knows and result.trace.strategy == "none":
                g = self.generator.closed_book(self.query)  # a confident zero_hop: the model's own knowledge
            else:
                g = generate_answer(self.generator, self.query, reading_evidence(result, self.strips), self.vector)
        except GeneratorError as exc:
            self.error = str(exc)
            engine = self.engine
            fallback = make_generator(engine.config.generator, engine.index.encoder, name="extractive")
            g = generate_answer(fallback, self.query, reading_evidence(result, self.strips), self.vector)
        self.ms += ms_since(t)
        return g

    def done(self, result: RetrievalResult, g: Generation) -> Answered:
        return Answered(result, g, self.ms, self.generator.name, self.error)


IndexT = TypeVar("IndexT", bound=QueryIndex)


class Engine(Generic[IndexT]):
    """Composes the stages over one index. `generator_knows`: the generator answers from its own
    knowledge, so a confident zero_hop may skip retrieval (the extractive default cannot)."""

    def __init__(self, index: IndexT, classifier: ComplexityClassifier | None = None,
                 generator_knows: bool = False, config: AmsragConfig | None = None) -> None:
        self.index = index
        self.config = config or index.config  # another config: query-time settings only (router, fusion)
        self.router = Router(self.config.router)
        self.generator_knows = generator_knows
        self._classifier = classifier
        self._routing_encoder: Encoder | None = None
        self._routing_vectors: OrderedDict[str, np.ndarray] = OrderedDict()
        self._routing_lock = threading.Lock()
        self._zh_reader: Generator | None = None
        self._auditor: SupportAuditor | None = None
        self._executor = RetrieverExecutor()
        self.passes = RetrievalPass(index, self.config, self._executor)
        self.corrective = CorrectiveLoop(index, self.config.corrective, self.config.external, self.router,
                                         self.passes)
        self._generator: Generator | None = None
        self.taxonomy = Taxonomy(index, self.config)
        self.table_route = TableRoute(index, self.config)
        self.global_route = GlobalRoute(index, self.config)
        self.max_question_chars = self.config.serve.max_question_chars  # the service sets its own limit here
        self.composer = Composer(self)

    def check_question(self, question: object) -> str:
        """`check_question` against this engine's limit (every public entry point taking a question runs it)."""
        return check_question(question, self.max_question_chars)

    @classmethod
    def open(cls, index_dir: str | Path, config: AmsragConfig | None = None, **kwargs: Any) -> Engine[Store]:
        """The engine over an index directory or a postgresql:// URL; `config`: other query-time settings."""
        from amsrag.store.open import open_index

        return Engine(open_index(index_dir), config=config, **kwargs)

    def prestart_threads(self) -> None:
        """Start the retriever pool's threads from this thread (see `RetrieverExecutor.prestart`)."""
        self._executor.prestart()

    def close(self) -> None:
        self._executor.close()
        self.corrective.close()
        self.index.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def routing_encoder(self) -> Encoder:
        """The encoder the classifier, the task head and the query library were trained on (MiniLM): the
        index's own when it is MiniLM, else a MiniLM of the engine's (an e5 vector means nothing to them)."""
        if self.index.config.embedding.model == ROUTING_MODEL:
            return self.index.encoder  # live: a refreshed index may hold a new encoder
        if self._routing_encoder is None:
            self._routing_encoder = MiniLMEncoder()
        return self._routing_encoder

    def routing_vector(self, query: str, query_vector: np.ndarray) -> np.ndarray:
        """`query_vector` (the index's encoding) as the routing models read it. On an index of another encoder
        the routing encoding of the last few questions is kept: the classifier and the task head both read it."""
        if self.index.config.embedding.model == ROUTING_MODEL:
            return query_vector
        with self._routing_lock:
            kept = self._routing_vectors.get(query)
        if kept is not None:
            return kept
        vector = self.routing_encoder.encode_query(query)
        with self._routing_lock:
            self._routing_vectors[query] = vector
            while len(self._routing_vectors) > ROUTING_VECTORS_KEPT:
                self._routing_vectors.popitem(last=False)
        return vector

    def reader_for(self, query: str, generator: Generator) -> Generator:
        """The Chinese reader in place of the English span reader for a Chinese question (other generators,
        LLMs included, read any language themselves)."""
        if not isinstance(generator, SpanReaderGenerator) or not is_chinese(query):
            return generator
        if self._zh_reader is None:
            from amsrag.generate.zh_reader import ZhReaderGenerator

            self._zh_reader = ZhReaderGenerator()
        return self._zh_reader

    @property
    def classifier(self) -> ComplexityClassifier:
        if self._classifier is None:  # shares the index's encoder: one model per process
            self._classifier = ComplexityClassifier.from_config(self.config.classifier, encoder=self.routing_encoder)
        return self._classifier

    @property
    def external(self) -> ExternalSources:
        """The configured external sources (falsy when none)."""
        return self.corrective.external

    @property
    def generator(self) -> Generator:
        """The configured generator, built once per engine."""
        if self._generator is None:
            self._generator = make_generator(self.config.generator, self.index.encoder)
        return self._generator

    # ------------------------------------------------------------------ retrieval
    def retrieve(self, query: str, system: str = "full", k: int | None = None,
                 query_vector: np.ndarray | None = None, corrective: bool | None = None,
                 generator_knows: bool | None = None, explain: int = 0, where: Where | None = None) -> RetrievalResult:
        """Passages for `query` and the trace of how they were found. `corrective`: run the corrective
        step (systems that include it only); default: `corrective.on_retrieve` of the configuration.
        `generator_knows`: this call's generator answers from its own knowledge (default: the engine's).
        `explain`: with the learned fuser, trace the top feature contributions of this many leading passages.
        `where`: only passages this metadata filter allows (`amsrag.filters`), ranked within them."""
        allowed = self._allowed(where)
        with scope(allowed):
            result = self._retrieve(query, system, k, query_vector, corrective, generator_knows, explain)
        trace = replace(result.trace, language=question_language(query, self.config))
        return replace(result, trace=trace if allowed is None else replace(trace, filter=allowed.trace()))

    def _allowed(self, where: Where | None) -> AllowedRows | None:
        """The rows a filter allows (None without one). A call inside a filtered call keeps the outer filter."""
        if where:
            return self.index.allowed_rows(where)
        return current_scope()

    def _retrieve(self, query: str, system: str, k: int | None, query_vector: np.ndarray | None,
                  corrective: bool | None, generator_knows: bool | None, explain: int) -> RetrievalResult:
        side = self._side_route(query, system, query_vector, generator_knows, None)
        if isinstance(side, RetrievalResult):
            return side
        first = self._first_pass(query, system, k, query_vector, generator_knows, explain,
                                 side if isinstance(side, _SideDecision) else None)
        cfg = self.config.corrective
        if first.spec.corrective and cfg.enabled and (cfg.on_retrieve if corrective is None else corrective):
            return self._checked(first)
        return first.result()

    def _first_pass(self, query: str, system: str, k: int | None, query_vector: np.ndarray | None,
                    generator_knows: bool | None, explain: int = 0, side: _SideDecision | None = None,
                    widest: bool = False) -> _FirstPass:
        query = self.check_question(query)
        knows = self.generator_knows if generator_knows is None else generator_knows
        spec = system_spec(system)
        if k is not None and k < 1:
            raise InputError(f"k must be a positive integer, got {k}")
        timings: Timings = {}
        t0 = time.perf_counter()
        if query_vector is None:
            query_vector = self.index.encoder.encode_query(query)
        timings["embed"] = ms_since(t0)
        if side is not None:  # classified already (the five-way decision sent it down the text path)
            complexity: ComplexityTrace | None = side.complexity
            timings.update(side.timings)
        else:
            complexity = self._classify(spec, query, query_vector, knows, timings) if spec.classifies else None
        plan = self._plan(spec, complexity, knows)
        if widest:
            plan = self._widest(spec, complexity, plan)
        first = self.passes.run(spec, plan, complexity, query, query_vector, k, timings, explain=explain)
        timings["total"] = ms_since(t0)
        return _FirstPass(query, spec, k, query_vector, complexity, plan, first, timings, t0, side)

    def _side_route(self, query: str, system: str, query_vector: np.ndarray | None, knows: bool | None,
                    generator: Generator | None) -> RetrievalResult | Answered | _SideDecision | None:
        """The five-way decision (systems with `taxonomy` only): a table or global answer when that route
        answers (`Answered` for `answer`, its evidence as a `RetrievalResult` for `retrieve`), else the
        classification and the reason the query goes down the text path; None without a taxonomy."""
        spec = system_spec(system)
        if not (spec.taxonomy and self.taxonomy.active) or current_scope() is not None:
            return None  # the table and global routes answer over tables and themes, which filters do not scope
        query = self.check_question(query)
        knows = self.generator_knows if knows is None else knows
        t0 = time.perf_counter()
        if query_vector is None:
            query_vector = self.index.encoder.encode_query(query)
        timings: Timings = {"embed": ms_since(t0)}
        complexity = self._classify(spec, query, query_vector, knows, timings)
        t = time.perf_counter()
        decision, hits = self.taxonomy.decide(query, self.routing_vector(query, query_vector), complexity)
        timings["taxonomy"] = ms_since(t)
        routed: RouteAnswer | None = None
        if decision.route == "table":
            tables = self.taxonomy.tables()
            routed = self.table_route.answer(query, hits, tables, generator) if tables is not None else None
        elif decision.route == "global":
            routed = self.global_route.answer(query, query_vector, generator)
        if routed is not None and routed.answered:
            timings[decision.route] = routed.generation.ms
            timings["total"] = ms_since(t0)
            trace = Trace(system=spec.name, complexity=complexity, strategy=decision.route, reason=decision.reason,
                          timings=timings, taxonomy=decision,
                          structured=routed.trace if decision.route == "table" else None,
                          global_search=routed.trace if decision.route == "global" else None)
            result = RetrievalResult(query, routed.passages, trace)
            if generator is None:
                return result
            return Answered(result, routed.generation, routed.generation.ms, generator.name)
        fell_back = routed.trace if routed is not None else None
        if decision.route != "retrieval" and fell_back is None:
            fell_back = {"fallback": f"the index has no {'tables' if decision.route == 'table' else 'themes'}"}
        return _SideDecision(complexity, decision, timings,
                             structured=fell_back if decision.route == "table" else None,
                             global_search=fell_back if decision.route == "global" else None)

    def _checked(self, first: _FirstPass) -> RetrievalResult:
        """The first pass after the corrective step (which may escalate to wider passes)."""
        timings = dict(first.timings)
        outcome = self.corrective.run(first.spec, first.complexity, first.query, first.vector, first.k, first.first,
                                      timings)
        timings["total"] = ms_since(first.t0)
        return first.result(outcome, timings)

    def complexity_of(self, query: str, vector: np.ndarray, generator_knows: bool | None = None) -> ComplexityTrace:
        """The classifier's view of `query` as routing sees it (the class retrieval is configured by)."""
        query = self.check_question(query)
        knows = self.generator_knows if generator_knows is None else generator_knows
        return self._classify(system_spec("full"), query, vector, knows, {})

    def _classify(self, spec: SystemSpec, query: str, vector: np.ndarray, knows: bool,
                  timings: Timings) -> ComplexityTrace:
        t = time.perf_counter()
        library = self.index.query_library() if self.config.classifier.library else None
        pred = self.classifier.predict(query, query_vector=self.routing_vector(query, vector), library=library)
        timings["classify"] = ms_since(t)
        label, alpha = retrieval_class(pred.label, pred.probs, pred.alpha, knows)
        if label != pred.label:  # what retrieval is configured by (the trace keeps both)
            trace = ComplexityTrace(pred.label, dict(pred.probs), pred.alpha, label, alpha, pred.library,
                                    pred.decided_by, pred.embedding)
        else:
            trace = ComplexityTrace(pred.label, dict(pred.probs), pred.alpha, library=pred.library,
                                    decided_by=pred.decided_by, embedding=pred.embedding)
        cfg = self.config.decompose
        if spec.compose and cfg.enabled and cfg.route_by_plan and trace.embedding:
            t = time.perf_counter()
            trace = self.composer.route_evidence(query, trace)
            timings["plan"] = ms_since(t)
        return trace

    def _plan(self, spec: SystemSpec, complexity: ComplexityTrace | None, knows: bool) -> RoutePlan:
        cfg = self.config.router
        if not spec.adaptive:
            return RoutePlan("C" if len(spec.retrievers) > 1 else "A", spec.retrievers,
                             complexity.label if complexity else "", complexity.alpha if complexity else 1.0,
                             cfg.depth["fixed"], cfg.k["fixed"], False, f"fixed pipeline {spec.name}")
        if complexity is None:
            raise ValueError(f"adaptive system {spec.name!r} routes a query that was not classified")
        label, alpha = complexity.routed
        if cfg.decision == "bayes" and not spec.label_only:
            return self.router.bayes_route(label, complexity.probs, knows)
        if spec.label_only:  # Adaptive-RAG: the label alone decides, as if the classifier were always sure
            label = complexity.label  # zero -> none or single, one -> single, multi -> the multi-hop path
            forced = {"zero_hop": 1.0, "one_hop": 1.0, "multi_hop": 0.0}[label]
            plan = self.router.route(label, forced, knows)
            return RoutePlan(plan.strategy, plan.retrievers, label, alpha, plan.depth, plan.k, plan.multi_hop,
                             f"label {label} (confidence ignored)")
        plan = self.router.route(label, alpha, knows)
        if plan.strategy == "A" and not complexity.embedding and cfg.blind_strategy == "B":
            # The classifier could not read the question's language and decided by its structure alone: its
            # confidence is not calibrated for that, so no single-retriever shortcut.
            return self.router.plan("B", label, alpha, knows, f"{plan.reason}, but the classifier read only the "
                                    "question's structure (not its language): two complementary retrievers")
        return plan

    def _widest(self, spec: SystemSpec, complexity: ComplexityTrace | None, plan: RoutePlan) -> RoutePlan:
        """The multi_hop plan on Strategy C (every retriever and the second hop) in place of `plan`. The question
        keeps the classifier's class and confidence (fusion weights, the audit), so the forced answer differs
        from the routed one only by the evidence the route reaches."""
        if not spec.adaptive or complexity is None:
            raise InputError(f"system {spec.name!r} has a fixed route: only an adaptive system can be forced onto "
                             f"the widest route")
        label, alpha = complexity.routed
        return self.router.plan("C", "multi_hop", alpha, reason=f"widest route forced (routing chose "
                                f"{plan.strategy} for {label}: {plan.reason})")

    # ------------------------------------------------------------------ answering
    def ask(self, query: str, system: str = "full", generator: Generator | None = None, *,
            widest: bool = False, where: Where | None = None) -> AnswerResult:
        """Retrieve, check the evidence (corrective step), then answer with `generator` (default: the
        configured one).

        A generator that answers from its own knowledge may skip retrieval twice over: the TARG gate
        (a closed-book answer whose confidence clears `generator.targ_threshold`) and a confident
        zero_hop route. A reader with calibrated confidence reads the first pass before the corrective
        step and skips it when confident (`corrective.reader_gate`). A generator that fails (dead server,
        missing model) degrades to the extractive answer over the same passages, flagged in
        trace["generator"]["error"].

        `widest`: answer on the widest text path whatever the classifier said (the shadow probe's wider path,
        `amsrag.monitor.shadow`): no TARG gate, no five-way decision, the multi_hop plan on Strategy C (every
        retriever and the second hop) whatever routing chose; the trace's reason names both.
        Adaptive systems only (a fixed pipeline has one route).

        A question that asks two or three things at once ("which command builds the site, and which one serves
        it?", `amsrag.decompose.parts`) is answered part by part, each with its own retrieval, citation and
        quote, listed in `parts` (`decompose.split_parts = false` turns this off).

        `where`: retrieve only passages this metadata filter allows (`amsrag.filters`); the table and global
        routes are skipped under a filter, and trace["filter"] names it and how many passages it allowed."""
        query = self.check_question(query)
        allowed = self._allowed(where)
        with scope(allowed):
            result = self._ask_split(query, system, generator, widest)
        return result if allowed is None else replace(result, trace=replace(result.trace, filter=allowed.trace()))

    def _ask_split(self, query: str, system: str, generator: Generator | None, widest: bool) -> AnswerResult:
        parts = split_parts(query) if self.config.decompose.split_parts and not widest else (query,)
        if len(parts) > 1:
            return answer_parts(query, parts, lambda part: self._ask_one(part, system, generator, widest))
        return self._ask_one(query, system, generator, widest)

    def _ask_one(self, query: str, system: str, generator: Generator | None, widest: bool) -> AnswerResult:
        result = self._ask(query, system, generator, widest)
        return replace(result, trace=replace(result.trace, language=question_language(result.query, self.config)))

    def _ask(self, query: str, system: str, generator: Generator | None, widest: bool = False) -> AnswerResult:
        t0 = time.perf_counter()
        query = self.check_question(query)
        generator = generator or self.generator
        gate = TargGate(generator, self.config.generator.targ_threshold)
        targ = None
        if system_spec(system).adaptive and gate.active and not widest and current_scope() is None:
            t = time.perf_counter()
            skip, confidence, closed = gate.decide(query)
            targ = TargTrace(confidence, gate.threshold, skip, ms_since(t))
            if skip and closed is not None:
                return self._closed_book_answer(query, system, closed, targ, t0)
        qv = self.index.encoder.encode_query(query)
        embed_ms = ms_since(t0)
        answered = self.answer(query, system, generator, qv, widest=widest)
        result, g = answered.retrieval, answered.generation
        timings = dict(result.trace.timings)
        timings["embed"] = embed_ms
        timings["generate"] = answered.generate_ms
        audit = self.audit(answered, generator)
        timings["audit"] = audit.ms
        timings["total"] = ms_since(t0)
        trace = result.trace.answered(answered.trace_entry(), timings, targ, audit,
                                      evidence=tuple(p.id for p in result.passages))
        quote = g.quote if g.quote is not None or g.abstained else find_quote(g.answer, result.passages, g.citations)
        return AnswerResult(result.query, g.answer, list(g.citations), g.abstained, self._signed(trace), quote)

    def _signed(self, trace: Trace) -> Trace:
        """`trace` with the answer's proxy signals (read from the trace itself, as the monitor reads a log row)."""
        return replace(trace, signals=proxy_signals(trace, self.config.monitor))

    def auditor(self, generator: Generator | None = None) -> SupportAuditor:
        """The citation-support auditor, built once; it reads with the engine's span reader when the
        generator is the extractive one (one reader model per engine)."""
        if self._auditor is None:
            from amsrag.audit import SupportAuditor

            reader = generator.reader if isinstance(generator, SpanReaderGenerator) else None
            self._auditor = SupportAuditor.from_config(self.config.audit, reader)
        return self._auditor

    def audit(self, answered: Answered, generator: Generator) -> AuditTrace:
        """The audit of an outcome of `answer` against the evidence its generator read. No audit for an answer of the
        table or global route."""
        g, result = answered.generation, answered.retrieval
        if result.trace.strategy in ("table", "global") and self.config.audit.enabled and not g.abstained:
            return AuditTrace(reason=f"the {result.trace.strategy} route's answer is not audited")
        complexity = result.trace.complexity
        multi_hop = complexity.routed[0] == "multi_hop" if complexity is not None else None
        return self.audit_answer(result.query, g, reading_evidence(result, self.config.generator.read_strips),
                                 multi_hop, generator)

    def audit_answer(self, query: str, g: Generation, evidence: Sequence[Any], multi_hop: bool | None,
                     generator: Generator) -> AuditTrace:
        """The audit of `g` (the answer to `query`) against the passages of `evidence` it cites (all of
        `evidence` when it cites none); `multi_hop`: the question was routed as multi-hop (None: unknown,
        two or more audited passages say so). No audit for an abstention or an answer without evidence."""
        if not self.config.audit.enabled:
            return AuditTrace(reason="audit disabled ([audit] enabled = false)")
        if g.abstained:
            return AuditTrace(reason="abstained")
        t = time.perf_counter()
        by_id = {p.id: p for p in evidence}
        cited = [by_id[c] for c in g.citations if c in by_id]
        against: Literal["citations", "evidence"] = "citations" if cited else "evidence"
        passages = cited or list(evidence)
        if not passages or not g.answer.strip():
            return AuditTrace(reason="no evidence: a closed-book answer")
        if multi_hop is None:
            multi_hop = len(passages) >= 2
        readable = not is_chinese(f"{query} {g.answer}")
        try:
            auditor = self.auditor(generator)
        except InputError as exc:  # a missing or corrupt audit artifact must not cost the answer
            return AuditTrace(reason=f"audit unavailable: {exc}", ms=ms_since(t))
        verdict = auditor.audit(query, g.answer, passages, multi_hop, against, readable)
        reason = "" if readable else "Chinese: the text-only model (the span reader reads English)"
        return AuditTrace(verdict, reason, ms_since(t))

    def answer(self, query: str, system: str, generator: Generator, query_vector: np.ndarray,
               k: int | None = None, *, widest: bool = False) -> Answered:
        """The evidence for `query` (corrective step included, or skipped by a confident reader) and
        `generator`'s answer over it; what `ask` runs after the TARG gate (the eval harness runs it too).
        A question the decomposer plans in several steps is also answered by a chain (`amsrag.pipeline.chain`),
        whose answer replaces the plain one when it is more confident (`trace.chain` says which stood).
        `widest`: as `ask`'s (the five-way decision is skipped, the route forced to the widest)."""
        answered = self._answer_plain(query, system, generator, query_vector, k, widest=widest)
        return self.composer.compose(query, system, answered, self.reader_for(query, generator))

    def _answer_plain(self, query: str, system: str, generator: Generator, query_vector: np.ndarray,
                      k: int | None = None, *, widest: bool = False) -> Answered:
        generator = self.reader_for(query, generator)
        knows = bool(generator.knows)
        side = None if widest else self._side_route(query, system, query_vector, knows or self.generator_knows,
                                                     generator)
        if isinstance(side, Answered):
            return side
        first = self._first_pass(query, system, k, query_vector, knows or self.generator_knows,
                                 side=side if isinstance(side, _SideDecision) else None, widest=widest)
        generator = self._reader_for_route(generator, first.complexity)
        cfg = self.config.corrective
        reading = _Reading(self, generator, query, query_vector, knows)
        if not (first.spec.corrective and cfg.enabled):
            result = first.result()
            return reading.done(result, reading.read(result))
        gated = isinstance(generator, CalibratedReader) and generator.calibrated_confidence and cfg.reader_gate < 1
        if gated:
            early = first.result()
            g = reading.read(early)
            conf = g.confidence if g.confidence is not None else 0.0
            conf = float(g.details.get("span_confidence", conf))  # a sentence answer: the gate reads the span's
            if conf >= cfg.reader_gate:
                return reading.done(first.result(reader=ReaderCheck("accepted", conf, cfg.reader_gate)), g)
            if cfg.below_gate == "escalate":
                timings = dict(first.timings)
                outcome = self.corrective.widen(first.spec, first.complexity, first.query, first.vector, first.k,
                                                first.first, timings, ReaderCheck("escalated", conf, cfg.reader_gate))
                if outcome is None:  # already the widest route: the first read stands
                    return reading.done(first.result(reader=ReaderCheck("kept", conf, cfg.reader_gate)), g)
                timings["total"] = ms_since(first.t0)
                widened = first.result(outcome, timings)
                return reading.done(widened, reading.read(widened))
            checked = self._checked(first)
            if reading.evidence_ids(checked) == reading.evidence_ids(early):
                return reading.done(checked, g)  # the step kept the evidence: the first read stands
            return reading.done(checked, reading.read(checked))
        checked = self._checked(first)
        return reading.done(checked, reading.read(checked))

    def _reader_for_route(self, generator: Generator, complexity: ComplexityTrace | None) -> Generator:
        """`generator` with the multi-hop abstention threshold when the question is routed multi-hop."""
        lowered = self.config.generator.multi_hop_threshold
        if (lowered is None or complexity is None or complexity.routed[0] != "multi_hop"
                or not isinstance(generator, AbstainsBelow) or lowered >= generator.threshold):
            return generator
        return generator.at_threshold(lowered)

    def _closed_book_answer(self, query: str, system: str, g: Generation, targ: TargTrace,
                            t0: float) -> AnswerResult:
        """The TARG gate fired: the closed-book answer stands, no retrieval ran."""
        audit = AuditTrace(reason="abstained" if g.abstained else "no evidence: a closed-book answer")
        trace = Trace(system=system, complexity=None, strategy="none",
                      reason=f"TARG: closed-book confidence {targ.confidence or 0.0:.3f} >= {targ.threshold}",
                      generator=g.trace(), targ=targ, audit=audit,
                      timings={"embed": 0.0, "retrieve": {}, "fusion": 0.0, "mmr": 0.0, "targ": targ.ms,
                               "total": ms_since(t0)})
        return AnswerResult(query, g.answer, [], g.abstained, self._signed(trace))
