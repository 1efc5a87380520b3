"""Which way a question goes: its classification (the hop classifier, the query library's vote, the decomposer's
plan as evidence), the five-way decision that may answer it on the table or global route, and the route plan of
the text path (DESIGN §3)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Protocol

import numpy as np

from amsrag.config import AmsragConfig
from amsrag.errors import InputError
from amsrag.generate import Generator
from amsrag.pipeline.context import QueryContext, ms_since
from amsrag.pipeline.first_pass import SideDecision
from amsrag.pipeline.results import Answered, RetrievalResult
from amsrag.pipeline.routes import GlobalRoute, RouteAnswer, TableRoute, Taxonomy
from amsrag.pipeline.trace import ComplexityTrace, Trace
from amsrag.pipeline.trace_parts import GlobalRouteTrace, RouteFallback, TableRouteTrace
from amsrag.retrieve.filtered import current_scope
from amsrag.route import RoutePlan, Router
from amsrag.route.router import retrieval_class
from amsrag.store.base import QueryIndex

if TYPE_CHECKING:
    from amsrag.classify import ComplexityClassifier
    from amsrag.pipeline.compose import Composer


class RoutingHost(Protocol):
    """What routing uses of its engine (`Engine` is one): the index and configuration, the classifier and the
    routing encoding, the router, the three routes beside retrieval and the composer (the plan as evidence)."""

    config: AmsragConfig
    router: Router
    taxonomy: Taxonomy
    table_route: TableRoute
    global_route: GlobalRoute
    composer: Composer

    @property
    def index(self) -> QueryIndex: ...

    @property
    def classifier(self) -> ComplexityClassifier: ...

    def routing_vector(self, query: str, query_vector: np.ndarray) -> np.ndarray: ...


class QueryRouting:
    """Classifies questions and routes them, for one engine (read at each call: the engine's parts may change)."""

    def __init__(self, host: RoutingHost) -> None:
        self.host = host

    def classify(self, ctx: QueryContext) -> ComplexityTrace:
        """The classifier's view of the question as routing sees it (the class retrieval is configured by)."""
        host, query = self.host, ctx.question
        t = time.perf_counter()
        library = host.index.query_library() if host.config.classifier.library else None
        pred = host.classifier.predict(query, query_vector=host.routing_vector(query, ctx.vector), library=library)
        ctx.timings["classify"] = ms_since(t)
        label, alpha = retrieval_class(pred.label, pred.probs, pred.alpha, ctx.knows)
        differs = label != pred.label  # retrieval is configured by another class: the trace keeps both
        trace = ComplexityTrace(pred.label, dict(pred.probs), pred.alpha, route_label=label if differs else None,
                                route_alpha=alpha if differs else None, library=pred.library,
                                decided_by=pred.decided_by, embedding=pred.embedding)
        cfg = host.config.decompose
        if ctx.spec.compose and cfg.enabled and cfg.route_by_plan and trace.embedding:
            t = time.perf_counter()
            trace = host.composer.route_evidence(query, trace)
            ctx.timings["plan"] = ms_since(t)
        return trace

    def plan(self, ctx: QueryContext) -> RoutePlan:
        """The route plan of the text path for the classified `ctx`."""
        cfg, router, spec, complexity = self.host.config.router, self.host.router, ctx.spec, ctx.complexity
        if not spec.adaptive:
            return RoutePlan("C" if len(spec.retrievers) > 1 else "A", spec.retrievers,
                             complexity.label if complexity else "", complexity.alpha if complexity else 1.0,
                             cfg.depth["fixed"], cfg.k["fixed"], False, f"fixed pipeline {spec.name}")
        if complexity is None:
            raise ValueError(f"adaptive system {spec.name!r} routes a query that was not classified")
        label, alpha = complexity.routed
        if cfg.decision == "bayes" and not spec.label_only:
            return router.bayes_route(label, complexity.probs, ctx.knows)
        if spec.label_only:  # Adaptive-RAG: the label alone decides, as if the classifier were always sure
            label = complexity.label  # zero -> none or single, one -> single, multi -> the multi-hop path
            forced = {"zero_hop": 1.0, "one_hop": 1.0, "multi_hop": 0.0}[label]
            plan = router.route(label, forced, ctx.knows)
            return RoutePlan(plan.strategy, plan.retrievers, label, alpha, plan.depth, plan.k, plan.multi_hop,
                             f"label {label} (confidence ignored)")
        plan = router.route(label, alpha, ctx.knows)
        if plan.strategy == "A" and not complexity.embedding and cfg.blind_strategy == "B":
            # The classifier could not read the question's language and decided by its structure alone: its
            # confidence is not calibrated for that, so no single-retriever shortcut.
            return router.plan("B", label, alpha, ctx.knows, f"{plan.reason}, but the classifier read only the "
                               "question's structure (not its language): two complementary retrievers")
        return plan

    def widest(self, ctx: QueryContext, plan: RoutePlan) -> RoutePlan:
        """The multi_hop plan on Strategy C (every retriever and the second hop) in place of `plan`. The question
        keeps the classifier's class and confidence (fusion weights, the audit), so the forced answer differs
        from the routed one only by the evidence the route reaches."""
        spec, complexity = ctx.spec, ctx.complexity
        if not spec.adaptive or complexity is None:
            raise InputError(f"system {spec.name!r} has a fixed route: only an adaptive system can be forced onto "
                             f"the widest route")
        label, alpha = complexity.routed
        return self.host.router.plan("C", "multi_hop", alpha, reason=f"widest route forced (routing chose "
                                     f"{plan.strategy} for {label}: {plan.reason})")

    def side_route(self, ctx: QueryContext,
                   generator: Generator | None) -> RetrievalResult | Answered | SideDecision | None:
        """The five-way decision (systems with `taxonomy` only): a table or global answer when that route
        answers (`Answered` for `answer`, its evidence as a `RetrievalResult` for `retrieve`), else the
        classified context and the reason the question goes down the text path; None without a taxonomy."""
        host, spec, query = self.host, ctx.spec, ctx.question
        if not (spec.taxonomy and host.taxonomy.active) or current_scope() is not None:
            return None  # the table and global routes answer over tables and themes, which filters do not scope
        complexity = self.classify(ctx)
        ctx = ctx.classified(complexity)
        t = time.perf_counter()
        decision, hits = host.taxonomy.decide(query, host.routing_vector(query, ctx.vector), complexity)
        ctx.timings["taxonomy"] = ms_since(t)
        structured: TableRouteTrace | None = None
        global_search: GlobalRouteTrace | None = None
        routed: RouteAnswer[TableRouteTrace] | RouteAnswer[GlobalRouteTrace] | None = None
        if decision.route == "table":
            tables = host.taxonomy.tables()
            if tables is None:
                structured = RouteFallback("the index has no tables")
            else:
                table = host.table_route.answer(query, hits, tables, generator)
                routed, structured = table, table.trace
        elif decision.route == "global":
            themes = host.global_route.answer(query, ctx.vector, generator)
            routed, global_search = themes, themes.trace
        if routed is not None and routed.answered:
            ctx.timings[decision.route] = routed.generation.ms
            ctx.total()
            trace = Trace(system=spec.name, complexity=complexity, strategy=decision.route, reason=decision.reason,
                          timings=ctx.timings, taxonomy=decision, structured=structured, global_search=global_search)
            result = RetrievalResult(query, routed.passages, trace)
            if generator is None:
                return result
            return Answered(result, routed.generation, routed.generation.ms, generator.name)
        return SideDecision(ctx, decision, structured, global_search)
