"""Composition inside `Engine.answer`: the decomposer's plan, the chain that answers it, and the choice
between the chain's answer and the plain reader's."""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol

from amsrag.config import DecomposeConfig
from amsrag.decompose.base import Decomposer
from amsrag.decompose.calibration import ChainCalibration, chain_features
from amsrag.decompose.plan import Plan
from amsrag.generate import Generation, Generator, generate_answer
from amsrag.generate.base import ABSTAIN, Completes, EvidencePassage, GeneratorError
from amsrag.generate.reader_generator import SpanReaderGenerator
from amsrag.pipeline.chain import ChainRunner, ChainStep, ChainTrace, StepEvidence, StepReading, agreed
from amsrag.pipeline.scored import ScoredPassage
from amsrag.pipeline.systems import system_spec
from amsrag.pipeline.trace import ComplexityTrace
from amsrag.text.language import is_chinese
from amsrag.text.questions import asks_for_attribute, is_yesno_question, question_options, restates_question

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from amsrag.config import AmsragConfig
    from amsrag.embed.encoder import Encoder
    from amsrag.pipeline.results import Answered, RetrievalResult
    from amsrag.pipeline.trace import AuditTrace


class ComposeHost(Protocol):
    """What the composer uses of its engine: the configuration, the routing encoder, step retrieval and the
    citation audit (`Engine` is one)."""

    config: AmsragConfig

    @property
    def routing_encoder(self) -> Encoder: ...

    def retrieve(self, query: str, system: str = ..., k: int | None = ..., *,
                 corrective: bool | None = ...) -> RetrievalResult: ...

    def audit_answer(self, query: str, g: Generation, evidence: Sequence[Any], multi_hop: bool | None,
                     generator: Generator) -> AuditTrace: ...

SIDE_ROUTES = ("table", "global", "none")
PLANS_KEPT = 64


def plan_route(label: str, alpha: float, plan: Plan, cfg: DecomposeConfig) -> tuple[str, float]:
    """(class, confidence) routing acts on, given the classifier's and the plan: one-hop stays one-hop at
    `route_down_alpha` or more, or when the plan is single-step or less sure than `route_up_probability`;
    otherwise multi-hop at the plan's multi-hop probability."""
    if label != "one_hop" or alpha >= cfg.route_down_alpha:
        return label, alpha
    p_multi = plan.multi_hop_probability
    if not plan.multi_step or p_multi < cfg.route_up_probability:
        return label, alpha
    return "multi_hop", p_multi


def restates_own_words(query: str, plan: Plan, answer: str) -> bool:
    """Whether a chain's answer only repeats words of the question: not an answer to a bridge or an intersection
    (a comparison's answer is one of the question's options, and is written in it)."""
    return plan.kind != "comparison" and question_options(query) is None and restates_question(answer, query)


def names_inner_entity(query: str, plan: Plan, chain: ChainTrace, answer: str) -> str | None:
    """The earlier hop's answer that `answer` names, when a bridge question asks for an attribute (a place, a time,
    a nationality...) of the entity that hop found: then `answer` is that entity, not the attribute. None
    otherwise."""
    if plan.kind != "bridge" or len(chain.steps) < 2 or not answer or not asks_for_attribute(query):
        return None
    return next((s.answer for s in chain.steps[:-1] if s.answer and agreed(answer, s.answer)), None)


class Composer:
    """Plans and chains for one engine; the decomposer is loaded on first use (one per engine)."""

    def __init__(self, engine: ComposeHost, decomposer: Decomposer | None = None) -> None:
        self.engine = engine
        self._decomposer = decomposer
        self._lock = threading.Lock()
        self._plans: OrderedDict[str, Plan] = OrderedDict()
        self._calibration: ChainCalibration | bool | None = False  # False: not loaded yet
        self.calibration_off = False  # `amsrag train decomposer calibrate` collects uncalibrated chains

    def decomposer_for(self, generator: Generator) -> Decomposer:
        """The LLM decomposer when the generator completes free-form prompts (and `decompose.llm`), else the
        trained tagger."""
        if self.engine.config.decompose.llm and isinstance(generator, Completes):
            from amsrag.decompose.llm import LLMDecomposer

            return LLMDecomposer(generator)
        return self.decomposer

    @property
    def calibration(self) -> ChainCalibration | None:
        """The chain calibration beside the decomposer's artifact (None: none fitted, raw confidences)."""
        with self._lock:
            if self._calibration is False:
                self._calibration = ChainCalibration.load(self.engine.config.decompose.model or None)
            return self._calibration if isinstance(self._calibration, ChainCalibration) else None

    @property
    def decomposer(self) -> Decomposer:
        with self._lock:
            if self._decomposer is None:
                from amsrag.decompose.tagger import TaggerDecomposer
                from amsrag.embed.encoder import MiniLMEncoder

                encoder = self.engine.routing_encoder
                self._decomposer = TaggerDecomposer.load(
                    self.engine.config.decompose.model or None,
                    encoder if isinstance(encoder, MiniLMEncoder) else MiniLMEncoder())
            return self._decomposer

    def plan(self, query: str, generator: Generator | None = None) -> Plan:
        """The plan of `query` by `decomposer_for(generator)` (the tagger without one); the tagger's last few
        plans are kept, so routing and composing one question decompose it once."""
        decomposer = self.decomposer_for(generator) if generator is not None else self.decomposer
        if decomposer is not self._decomposer:
            try:
                return decomposer.decompose(query)
            except GeneratorError as exc:  # the LLM is down or slow: the tagger's plan, as without one
                log.warning("LLM decomposer failed (%s); planning with the trained tagger", exc)
                return self.plan(query)
        with self._lock:
            kept = self._plans.get(query)
            if kept is not None:
                self._plans.move_to_end(query)
                return kept
        plan = decomposer.decompose(query)
        with self._lock:
            self._plans[query] = plan
            while len(self._plans) > PLANS_KEPT:
                self._plans.popitem(last=False)
        return plan

    def route_evidence(self, query: str, complexity: ComplexityTrace) -> ComplexityTrace:
        """The hop decision with the plan as evidence: a question the classifier routes one-hop keeps that route
        only when the plan is single-step or the classifier is surer than `decompose.route_down_alpha`; else it
        is routed multi-hop at the plan's multi-hop probability (`decided_by` "plan")."""
        cfg = self.engine.config.decompose
        label, alpha = complexity.routed
        if label != "one_hop" or alpha >= cfg.route_down_alpha:
            return complexity
        routed = plan_route(label, alpha, self.plan(query), cfg)
        if routed == (label, alpha):
            return complexity
        return replace(complexity, route_label=routed[0], route_alpha=routed[1], decided_by="plan")

    def compose(self, query: str, system: str, answered: Answered, generator: Generator) -> Answered:
        """`answered` with the plan in its trace and, when the chain answers more confidently, the chain's answer
        (systems that compose only; not for the table, global or closed-book routes, nor Chinese questions)."""
        cfg = self.engine.config.decompose
        trace = answered.retrieval.trace
        if not (cfg.enabled and system_spec(system).compose) or trace.strategy in SIDE_ROUTES \
                or is_chinese(query):
            return answered
        plan = self.plan(query, generator)
        plain = answered.generation
        candidate = str(plain.details.get("candidate") or "") if plain.abstained else plain.answer
        if not plan.multi_step or plan.confidence < cfg.min_plan_confidence:
            why = "one step" if not plan.multi_step else (
                f"plan confidence {plan.confidence:.3f} < {cfg.min_plan_confidence} (decompose.min_plan_confidence)")
            chain = ChainTrace(plan, reason=why, plain_answer=candidate, plain_confidence=plain.confidence)
            return replace(answered, retrieval=replace(answered.retrieval, trace=replace(trace, chain=chain)))
        step_passages: dict[str, ScoredPassage] = {}
        runner = ChainRunner(lambda q: self._evidence(q, step_passages), lambda q, ps: self._read(generator, q, ps),
                             cfg)
        chain = runner.run(plan)
        plain_conf = float(plain.confidence or 0.0)  # the reader's calibrated probability, abstained or not
        calibration = None if self.calibration_off else self.calibration
        if chain.answered and calibration is not None:
            features = chain_features(plan, [s.confidence for s in chain.steps], chain.answer, candidate, plain_conf,
                                      chain.confidence)
            chain = replace(chain, confidence=calibration.probability(features), executor_confidence=chain.confidence)
        # a generator that gives no confidence (a scripted or LLM answer): its answer stands unless it abstained
        comparable = plain.abstained or plain.confidence is not None
        use = chain.answered and comparable and chain.confidence >= plain_conf + cfg.prefer_chain_margin \
            and not restates_own_words(query, plan, chain.answer)
        chain = replace(chain, used=use, plain_answer=candidate, plain_confidence=plain.confidence)
        threshold = calibration.thresholds.get(plan.kind) if calibration is not None else None
        result = answered.retrieval
        g = plain
        if use:
            chain = replace(chain, steps=self._audited(chain.steps, step_passages, generator))
            given = {p.id for p in result.passages}
            extra = [step_passages[c] for c in chain.citations if c not in given and c in step_passages]
            result = replace(result, passages=[*result.passages, *extra])
            abstain = threshold is not None and chain.confidence < threshold
            details = {**plain.details, "chain": True, "plain_answer": candidate, "candidate": chain.answer}
            if threshold is not None:
                details["threshold"] = threshold
            g = Generation(ABSTAIN if abstain else chain.answer, () if abstain else chain.citations,
                           round(chain.confidence, 4), abstain, plain.prompt_tokens, plain.output_tokens,
                           plain.ms + chain.ms, plain.generator, details)
        elif threshold is not None and plain.confidence is not None and candidate \
                and plain.abstained != (plain_conf < threshold):
            # the plan type's threshold decides whether the plain answer is given, in place of the reader's own
            # (a generator that gives no confidence, an LLM, keeps its own decision)
            cited = plain.details.get("candidate_passage")
            abstain = plain_conf < threshold
            g = replace(plain, answer=ABSTAIN if abstain else candidate, abstained=abstain,
                        citations=() if abstain or not cited else (str(cited),),
                        details={**plain.details, "threshold": threshold, "plan_threshold": plan.kind})
        # the span reader's slip (reading the described entity for its attribute); an answer from a generator that
        # gives no confidence (an LLM) stands as it was given
        inner = names_inner_entity(query, plan, chain, g.answer) if comparable and not g.abstained else None
        if inner is not None:
            g = replace(g, answer=ABSTAIN, abstained=True, citations=(),
                        details={**g.details, "candidate": g.answer, "inner_entity": inner})
        result = replace(result, trace=replace(result.trace, chain=chain))
        return replace(answered, retrieval=result, generation=g, generate_ms=answered.generate_ms + chain.ms)

    def _audited(self, steps: tuple[ChainStep, ...], passages: dict[str, ScoredPassage],
                 generator: Generator) -> tuple[ChainStep, ...]:
        """Each step with the citation audit of its answer against the passage it cites."""
        out = []
        for step in steps:
            passage = passages.get(step.passage_id or "")
            if passage is None or not step.answer or step.answer in ("yes", "no"):  # a check is not a span to audit
                out.append(step)
                continue
            g = Generation(step.answer, (passage.id,), step.confidence)
            verdict = self.engine.audit_answer(step.question, g, [passage], False, generator).verdict
            out.append(step if verdict is None else replace(step, support=verdict.support, flagged=verdict.flagged))
        return tuple(out)

    def _evidence(self, question: str, kept: dict[str, ScoredPassage]) -> StepEvidence:
        cfg = self.engine.config.decompose
        result = self.engine.retrieve(question, system=cfg.step_system, k=cfg.step_k, corrective=False)
        for p in result.passages:
            kept.setdefault(p.id, p)
        trace = result.trace
        return StepEvidence(result.passages, tuple(dict.fromkeys(r.name for r in trace.runs)), trace.retriever_calls)

    @staticmethod
    def _read(generator: Generator, question: str, passages: Sequence[EvidencePassage]) -> StepReading:
        if isinstance(generator, SpanReaderGenerator):
            scores = [float(getattr(p, "score", 0.0)) for p in passages]
            r = generator.reader.read(question, passages, scores)
            if r.kind == "span" and is_yesno_question(question):  # a check: the yes/no head decides
                p_yes, p_no = r.features.get("p_yes", 0.0), r.features.get("p_no", 0.0)
                return StepReading("yes" if p_yes >= p_no else "no", r.passage_id, max(p_yes, p_no), "yes/no")
            return StepReading(r.answer, r.passage_id, r.confidence, r.kind,
                               tuple((a.answer, a.passage_id) for a in r.alternatives))
        g = generate_answer(generator, question, passages)
        confidence = g.confidence if g.confidence is not None else (0.0 if g.abstained else 0.5)
        return StepReading("" if g.abstained else g.answer, g.citations[0] if g.citations else None, confidence)
