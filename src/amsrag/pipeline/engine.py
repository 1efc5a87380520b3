"""The adaptive pipeline: embed once → classify → route → retrieve (parallel) → fuse → MMR → corrective
check → generate, with the trace of every decision (DESIGN §2, §9).

The engine composes the stages through their Protocols: a `PassageIndex` (either backend), the
classifier, the `Router`, one `RetrievalPass` per plan, the `CorrectiveLoop` and a `Generator`. Each question
becomes one `QueryContext` (its vector computed once, shared by the classifier, the dense retriever and MMR)
that `QueryRouting` classifies and routes, the first pass retrieves for (`FirstPass`), and `Reading` answers
from; `AnswerAudit` audits the answer.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Self, TypeVar

import numpy as np

from amsrag.audit.signals import proxy_signals
from amsrag.classify import ComplexityClassifier
from amsrag.config import AmsragConfig
from amsrag.decompose.parts import split_parts
from amsrag.embed.encoder import Encoder, MiniLMEncoder
from amsrag.embed.factory import ROUTING_MODEL
from amsrag.errors import InputError
from amsrag.filters import Where
from amsrag.generate import Generation, Generator, make_generator
from amsrag.generate.quote import find_quote
from amsrag.generate.span_reader import SpanReaderGenerator
from amsrag.generate.targ import TargGate
from amsrag.indexes.allowed_rows import AllowedRows
from amsrag.pipeline.answering import Reading, closed_book_answer, reader_for_route
from amsrag.pipeline.auditing import AnswerAudit
from amsrag.pipeline.compose import Composer
from amsrag.pipeline.context import QueryContext, ms_since
from amsrag.pipeline.corrective import CorrectiveLoop
from amsrag.pipeline.execute import RetrieverExecutor
from amsrag.pipeline.first_pass import FirstPass, SideDecision
from amsrag.pipeline.language import question_language
from amsrag.pipeline.parts import answer_parts
from amsrag.pipeline.passes import RetrievalPass
from amsrag.pipeline.results import Answered, AnswerResult, RetrievalResult, check_question
from amsrag.pipeline.routes import GlobalRoute, TableRoute, Taxonomy
from amsrag.pipeline.routing import QueryRouting
from amsrag.pipeline.systems import system_spec
from amsrag.pipeline.trace import AuditTrace, ComplexityTrace, TargTrace, Timings, Trace
from amsrag.retrieve.external import ExternalSources
from amsrag.retrieve.filtered import current_scope, scope
from amsrag.route import Router
from amsrag.store.base import QueryIndex, Store
from amsrag.text.language import is_chinese

if TYPE_CHECKING:
    from amsrag.audit import SupportAuditor

ROUTING_VECTORS_KEPT = 64  # routing encodings kept per engine (`Engine.routing_vector`)


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
        self.routing = QueryRouting(self)
        self.audits = AnswerAudit(self.config)

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

    def query_context(self, query: str, system: str, k: int | None = None, query_vector: np.ndarray | None = None,
                generator_knows: bool | None = None, explain: int = 0) -> QueryContext:
        """`query` checked and embedded (unless `query_vector` is given) for `system`: what every stage reads.
        `generator_knows`: default the engine's; `k`: None for the route's (checked by the first pass)."""
        spec = system_spec(system)
        query = self.check_question(query)
        knows = self.generator_knows if generator_knows is None else generator_knows
        timings: Timings = {}
        t0 = time.perf_counter()
        if query_vector is None:
            query_vector = self.index.encoder.encode_query(query)
        timings["embed"] = ms_since(t0)
        return QueryContext(query, query_vector, spec, k, knows, explain, timings=timings, t0=t0)

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
            result = self._retrieve(self.query_context(query, system, k, query_vector, generator_knows, explain),
                                    corrective)
        trace = replace(result.trace, language=question_language(query, self.config))
        return replace(result, trace=trace if allowed is None else replace(trace, filter=allowed.trace()))

    def _allowed(self, where: Where | None) -> AllowedRows | None:
        """The rows a filter allows (None without one). A call inside a filtered call keeps the outer filter."""
        if where:
            return self.index.allowed_rows(where)
        return current_scope()

    def _retrieve(self, ctx: QueryContext, corrective: bool | None) -> RetrievalResult:
        side = self.routing.side_route(ctx, None)
        if isinstance(side, RetrievalResult):
            return side
        first = self._first_pass(ctx, side if isinstance(side, SideDecision) else None)
        cfg = self.config.corrective
        if ctx.spec.corrective and cfg.enabled and (cfg.on_retrieve if corrective is None else corrective):
            return first.checked(self.corrective)
        return first.result()

    def _first_pass(self, ctx: QueryContext, side: SideDecision | None = None, widest: bool = False) -> FirstPass:
        if ctx.k is not None and ctx.k < 1:  # checked here, as before the context: the side routes take no k
            raise InputError(f"k must be a positive integer, got {ctx.k}")
        if side is not None:  # classified already (the five-way decision sent it down the text path)
            ctx = side.context
        elif ctx.spec.classifies:
            ctx = ctx.classified(self.routing.classify(ctx))
        plan = self.routing.plan(ctx)
        if widest:
            plan = self.routing.widest(ctx, plan)
        first = self.passes.run(ctx, plan)
        ctx.total()
        return FirstPass(ctx, plan, first, side)

    def complexity_of(self, query: str, vector: np.ndarray, generator_knows: bool | None = None) -> ComplexityTrace:
        """The classifier's view of `query` as routing sees it (the class retrieval is configured by)."""
        ctx = self.query_context(query, "full", query_vector=vector, generator_knows=generator_knows)
        return self.routing.classify(ctx)

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
        trace.generator.error.

        `widest`: answer on the widest text path whatever the classifier said (the shadow probe's wider path,
        `amsrag.monitor.shadow`): no TARG gate, no five-way decision, the multi_hop plan on Strategy C (every
        retriever and the second hop) whatever routing chose; the trace's reason names both.
        Adaptive systems only (a fixed pipeline has one route).

        A question that asks two or three things at once ("which command builds the site, and which one serves
        it?", `amsrag.decompose.parts`) is answered part by part, each with its own retrieval, citation and
        quote, listed in `parts` (`decompose.split_parts = false` turns this off).

        `where`: retrieve only passages this metadata filter allows (`amsrag.filters`); the table and global
        routes are skipped under a filter, and trace.filter names it and how many passages it allowed."""
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
                answer = closed_book_answer(query, system, closed, targ, t0)
                return replace(answer, trace=self._signed(answer.trace))
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
        ctx = self.query_context(query, system, k, query_vector, knows or self.generator_knows)
        side = None if widest else self.routing.side_route(ctx, generator)
        if isinstance(side, Answered):
            return side
        first = self._first_pass(ctx, side if isinstance(side, SideDecision) else None, widest)
        generator = reader_for_route(generator, first.context.complexity, self.config.generator.multi_hop_threshold)
        reading = Reading(self.config, self.index.encoder, generator, query, query_vector, knows)
        return reading.answer(first, self.corrective)

    # ------------------------------------------------------------------ the audit
    def auditor(self, generator: Generator | None = None) -> SupportAuditor:
        """The citation-support auditor (`AnswerAudit.auditor`)."""
        return self.audits.auditor(generator)

    def audit(self, answered: Answered, generator: Generator) -> AuditTrace:
        """The audit of an outcome of `answer` (`AnswerAudit.audit`)."""
        return self.audits.audit(answered, generator)

    def audit_answer(self, query: str, g: Generation, evidence: Sequence[Any], multi_hop: bool | None,
                     generator: Generator) -> AuditTrace:
        """The audit of `g` against the passages of `evidence` it cites (`AnswerAudit.audit_answer`)."""
        return self.audits.audit_answer(query, g, evidence, multi_hop, generator)
