"""A question's first retrieval pass and what follows it: the retrieval result of the pass alone, after the
corrective step, or widened once because the reader could not answer from it."""

from __future__ import annotations

from dataclasses import dataclass, replace

from amsrag.pipeline.context import QueryContext
from amsrag.pipeline.corrective import CorrectiveLoop, CorrectiveOutcome
from amsrag.pipeline.passes import Pass
from amsrag.pipeline.results import RetrievalResult
from amsrag.pipeline.trace import CorrectiveTrace, ReaderCheck, Timings, Trace
from amsrag.pipeline.trace_parts import GlobalRouteTrace, TableRouteTrace
from amsrag.route import RoutePlan
from amsrag.route.taxonomy import TaxonomyDecision


@dataclass(frozen=True, slots=True)
class SideDecision:
    """A question the five-way decision sent down the text path: its context (classified), the decision, and the
    route that was tried and fell back."""

    context: QueryContext
    decision: TaxonomyDecision
    structured: TableRouteTrace | None = None
    global_search: GlobalRouteTrace | None = None


@dataclass(frozen=True, slots=True)
class FirstPass:
    """One question's first retrieval pass (`first`, on `plan`), before the corrective step. `side`: the five-way
    decision that sent the question down the text path."""

    context: QueryContext
    plan: RoutePlan
    first: Pass
    side: SideDecision | None = None

    def _with_side(self, trace: Trace) -> Trace:
        if self.side is None:
            return trace
        return replace(trace, taxonomy=self.side.decision, structured=self.side.structured,
                       global_search=self.side.global_search)

    def result(self, outcome: CorrectiveOutcome | None = None, timings: Timings | None = None,
               reader: ReaderCheck | None = None) -> RetrievalResult:
        """The retrieval result: the first pass alone, or after the corrective step's `outcome`."""
        first, ctx = self.first, self.context
        checked = outcome.trace if outcome is not None else CorrectiveTrace(reader=reader)
        every: tuple[Pass, ...] = (first, *(outcome.passes if outcome is not None else ()))
        trace = Trace(system=ctx.spec.name, complexity=ctx.complexity, strategy=self.plan.strategy,
                      reason=self.plan.reason, runs=tuple(run for p in every for run in p.runs.values()),
                      run_passes=tuple(i for i, p in enumerate(every) for _ in p.runs),
                      searches=sum(p.searches for p in every), fusion=first.fused, second_hop=first.second_hop,
                      adaptive_k=first.adaptive, mmr=first.mmr, corrective=checked,
                      escalations=outcome.escalations if outcome is not None else (),
                      timings=timings if timings is not None else dict(ctx.timings))
        trace = self._with_side(trace)
        if outcome is None:
            return RetrievalResult(ctx.question, first.passages, trace)
        return RetrievalResult(ctx.question, outcome.passages, trace, outcome.strips)

    def checked(self, corrective: CorrectiveLoop) -> RetrievalResult:
        """The first pass after the corrective step (which may escalate to wider passes)."""
        ctx = self.context.timed_apart()
        outcome = corrective.run(ctx, self.first)
        ctx.total()
        return self.result(outcome, ctx.timings)

    def widened(self, corrective: CorrectiveLoop, check: ReaderCheck) -> RetrievalResult | None:
        """The first pass widened once because the reader's `check` fell below the gate; None when the route is
        already the widest."""
        ctx = self.context.timed_apart()
        outcome = corrective.widen(ctx, self.first, check)
        if outcome is None:
            return None
        ctx.total()
        return self.result(outcome, ctx.timings)
