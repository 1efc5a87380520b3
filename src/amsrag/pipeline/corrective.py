"""The corrective loop around the first pass (DESIGN §6): assess the evidence; correct → strips;
incorrect → discard, rewrite, escalate to a wider route and/or ask the external sources; ambiguous →
both. Then the sufficiency check may escalate once more before anything is generated."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from amsrag.config import CorrectiveConfig, ExternalConfig
from amsrag.correct import CorrectiveStep, Strip, check, rewrite_query
from amsrag.fuse import merge_lists
from amsrag.pipeline.context import QueryContext, ms_since
from amsrag.pipeline.passes import Pass, RetrievalPass
from amsrag.pipeline.scored import ScoredPassage
from amsrag.pipeline.trace import CorrectiveTrace, Escalation, ReaderCheck
from amsrag.retrieve.external import ExternalSources
from amsrag.retrieve.filtered import current_scope
from amsrag.route import Router
from amsrag.store.base import PassageIndex


@dataclass(frozen=True, slots=True)
class CorrectiveOutcome:
    """The evidence after the corrective step, what it did, the wider passes it ran, and the sentence
    strips of the passages it judged relevant (for a generator that reads strips)."""

    passages: list[ScoredPassage]
    trace: CorrectiveTrace
    escalations: tuple[Escalation, ...] = ()
    passes: tuple[Pass, ...] = ()  # aligned with `escalations`
    strips: tuple[Strip, ...] = field(default_factory=tuple)


class CorrectiveLoop:
    """Configured once per engine; the evaluator model and the external sources are built on first use."""

    def __init__(self, index: PassageIndex, config: CorrectiveConfig, external: ExternalConfig, router: Router,
                 passes: RetrievalPass) -> None:
        self.index = index
        self.config = config
        self.external_config = external
        self.router = router
        self.passes = passes
        self._step: CorrectiveStep | None = None
        self._external: ExternalSources | None = None

    @property
    def step(self) -> CorrectiveStep:
        if self._step is None:  # shares the index's encoder: one model per process
            self._step = CorrectiveStep(self.config, encoder=self.index.encoder)
        return self._step

    @property
    def external(self) -> ExternalSources:
        """The configured external sources (falsy when none)."""
        if self._external is None:
            self._external = ExternalSources(self.external_config)
        return self._external

    def close(self) -> None:
        if self._external is not None:
            self._external.close()

    def widen(self, ctx: QueryContext, first: Pass, check: ReaderCheck) -> CorrectiveOutcome | None:
        """The first pass widened once because the reader could not answer from it (no evaluator runs: the
        reader's confidence is the assessment): the next wider route searched with a keyword rewrite,
        merged behind the first pass's passages. None when the route is already the widest."""
        plan = first.plan
        wider = self.router.wider(plan) if self.config.max_escalations > 0 else None
        if wider is None:
            return None
        t = time.perf_counter()
        query = ctx.question
        q2 = rewrite_query(query, first.passages, self.config.rewrite_max_terms) if self.config.rewrite_escalation \
            else query
        second = self.passes.run(self._wider(ctx, q2), wider, prefix="escalated_")
        final = merged([first.passages, second.passages], ctx.k or wider.k)
        ctx.timings["corrective"] = ms_since(t)
        escalation = Escalation(plan.strategy, wider.strategy, wider.evidence_path, q2, f"reader: {check.reason}")
        return CorrectiveOutcome(final, CorrectiveTrace(reader=check), (escalation,), (second,))

    def _wider(self, ctx: QueryContext, question: str) -> QueryContext:
        vector = ctx.vector if question == ctx.question else self.index.encoder.encode_query(question)
        return ctx.wider(question, vector)

    def run(self, ctx: QueryContext, first: Pass) -> CorrectiveOutcome:
        """The corrective step on the first pass of `ctx` (its times go into `ctx.timings`)."""
        cfg = self.config
        query, k, timings, complexity = ctx.question, ctx.k, ctx.timings, ctx.complexity
        plan = first.plan
        t = time.perf_counter()
        passages = first.passages
        vectors = self.index.vectors_for_rows([p.row for p in passages]) if passages else None
        correction = self.step.correct(query, ctx.vector, passages, vectors)
        timings["corrective"] = ms_since(t)
        external_trace = None
        insufficient = False
        escalations: list[Escalation] = []
        wider_passes: list[Pass] = []
        current, final = plan, first.passages
        if correction.escalate:
            kept = [passages[i] for i in correction.kept]
            if not kept and not cfg.discard_incorrect:  # incorrect: demote rather than drop the first pass
                kept = list(passages)
            rewritten = correction.rewritten_query or query
            lists = [kept] if kept else []  # the first pass leads: a wider pass only adds what it lacks
            wider = self.router.wider(plan) if cfg.max_escalations > 0 else None
            if wider is not None:
                q2 = rewritten if cfg.rewrite_escalation else query
                second = self.passes.run(self._wider(ctx, q2), wider, prefix="escalated_")
                wider_passes.append(second)
                lists.append(second.passages)
                escalations.append(Escalation(plan.strategy, wider.strategy, wider.evidence_path, q2,
                                              f"corrective: {correction.assessment.action} "
                                              f"(S = {correction.assessment.score:.3f})"))
                current = wider
            if self.external and current_scope() is None:  # a filter scopes the answer to the index's documents
                result = self.external.search(rewritten, k or plan.k)
                external_trace = {key: v for key, v in result.to_dict().items() if key != "passages"}
                found = [ScoredPassage(p.id, p.title, p.text, p.score, -1) for p in result.passages]
                if found:
                    lists.append(found)
            final = merged(lists, k or current.k)
            insufficient = not final
        sufficiency = None
        if cfg.sufficiency and final:
            route_label = complexity.routed[0] if complexity is not None else ""
            sufficiency = check(query, final, multi_hop=current.multi_hop or route_label == "multi_hop")
            if not sufficiency.ok and len(escalations) < cfg.max_escalations:
                wider = self.router.wider(current)
                if wider is not None:
                    third = self.passes.run(self._wider(ctx, query), wider, prefix="sufficiency_")
                    wider_passes.append(third)
                    missing = f" (missing {', '.join(sufficiency.missing)})" if sufficiency.missing else ""
                    escalations.append(Escalation(current.strategy, wider.strategy, wider.evidence_path, query,
                                                  f"sufficiency: {sufficiency.reason}{missing}"))
                    final = merged([final, third.passages], k or wider.k)
        trace = CorrectiveTrace(correction, external_trace, insufficient, sufficiency)
        return CorrectiveOutcome(final, trace, tuple(escalations), tuple(wider_passes), tuple(correction.strips))


def merged(lists: list[list[ScoredPassage]], k: int) -> list[ScoredPassage]:
    """The lists' RRF merge as passages scored by it (the first list's copy of a passage wins)."""
    return [ScoredPassage(p.id, p.title, p.text, score, p.row, p.stored) for p, score in merge_lists(lists, k)]

