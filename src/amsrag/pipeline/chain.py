"""The chain executor: a decomposer's plan answered step by step with the engine's own retrieval and reader.

- bridge: each step is retrieved as its own question and read; its answer fills the next step's `#1`;
- comparison: per entity, its steps are run the same way, the last one reads the compared attribute; the
  values are parsed (dates with their precision, numbers with scale words, places/nationalities as strings)
  and the operator applied deterministically: "which came first, A or B" answers A or B, "are both …" yes/no;
- intersection: one step per entity ("Both A and B sing which genre?" -> "A sing which genre?"), each read with
  the reader's runners-up; the answer is the one both readings hold (the best-ranked pair that names the same
  thing), else the chain fails;
- a step that finds nothing (an empty or too unsure reading) fails the chain, naming the step.
The plain reader's answer stands when the chain fails or is less confident (`Engine.answer` decides).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from amsrag.config import DecomposeConfig
from amsrag.decompose.plan import Plan, Step
from amsrag.decompose.values import compare
from amsrag.generate.base import ABSTAIN, EvidencePassage
from amsrag.generate.metrics import normalize_answer


@dataclass(frozen=True, slots=True)
class StepReading:
    """A reader's answer to one step: `answer` is its best answer even when it would abstain."""

    answer: str
    passage_id: str | None
    confidence: float
    kind: str = "span"  # span | yes | no | option
    alternatives: tuple[tuple[str, str | None], ...] = ()  # the reader's runners-up: (answer, passage id)


@dataclass(frozen=True, slots=True)
class StepEvidence:
    passages: Sequence[EvidencePassage]
    retrievers: tuple[str, ...]
    calls: int


class StepRetriever(Protocol):
    def __call__(self, question: str) -> StepEvidence: ...


class StepReader(Protocol):
    def __call__(self, question: str, passages: Sequence[EvidencePassage]) -> StepReading: ...


@dataclass(frozen=True, slots=True)
class ChainStep:
    """One executed step of the trace."""

    question: str
    answer: str
    passage_id: str | None
    confidence: float
    retrievers: tuple[str, ...]
    ms: float
    entity: str = ""
    failed: str = ""  # why the step failed ("" when it answered)
    support: float | None = None  # the citation audit of this step's answer against its passage (None: not audited)
    flagged: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"question": self.question, "answer": self.answer, "passage": self.passage_id,
                               "confidence": round(self.confidence, 4), "retrievers": list(self.retrievers),
                               "ms": round(self.ms, 3)}
        if self.entity:
            out["entity"] = self.entity
        if self.failed:
            out["failed"] = self.failed
        if self.support is not None:
            out["audit"] = {"support": round(self.support, 4), "flagged": self.flagged}
        return out


@dataclass(frozen=True, slots=True)
class ChainTrace:
    """What the chain did: the plan, every step, its answer and whether it replaced the plain reader's."""

    plan: Plan
    steps: tuple[ChainStep, ...] = ()
    answer: str = ""
    citations: tuple[str, ...] = ()
    confidence: float = 0.0
    used: bool = False
    reason: str = ""
    failed_step: int | None = None  # 1-based number of the step that failed
    retriever_calls: int = 0
    ms: float = 0.0
    plain_answer: str = ""
    plain_confidence: float | None = None
    executor_confidence: float | None = None  # the runner's own figure, when `confidence` is the calibrated one

    @property
    def answered(self) -> bool:
        return bool(self.answer) and self.failed_step is None

    def to_dict(self) -> dict[str, Any]:
        return {"plan": self.plan.to_dict(), "steps": [s.to_dict() for s in self.steps], "answer": self.answer,
                "citations": list(self.citations), "confidence": round(self.confidence, 4), "used": self.used,
                "reason": self.reason, "failed_step": self.failed_step, "retriever_calls": self.retriever_calls,
                "ms": round(self.ms, 3), "plain_answer": self.plain_answer,
                "plain_confidence": self.plain_confidence, "executor_confidence": self.executor_confidence}


_PRED_STOP = frozenset({"a", "an", "the", "of", "in", "on", "for", "to", "by", "with", "from", "at", "as", "is", "are",
                        "was", "were", "be", "located", "situated", "considered", "known", "type", "types", "kind"})


def agreed(a: str, b: str) -> str | None:
    """The answer two readings share: equal once normalised, or one's words all in the other's (the shorter
    one: "country" of "country music"); None when they name different things.

    >>> agreed("country music", "Country"), agreed("rock", "pop")
    ('Country', None)
    """
    wa, wb = [singular(w) for w in normalize_answer(a).split()], [singular(w) for w in normalize_answer(b).split()]
    if not wa or not wb or not (set(wa) <= set(wb) or set(wb) <= set(wa)):
        return None
    return a if len(wa) < len(wb) or (len(wa) == len(wb) and len(a) <= len(b)) else b


def singular(word: str) -> str:
    """"games" -> "game", "bodies" -> "body" (a word of four letters or more)."""
    if len(word) > 3 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def predicate_words(text: str) -> set[str]:
    """Content words, singular ("games" -> "game"), lower case."""
    return {singular(w) for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in _PRED_STOP}


def predicate_holds(predicate: str, text: str) -> tuple[bool, float]:
    """Whether `text` says its subject is `predicate` ("film directors"), and the share of the predicate's content
    words it holds: all of them, or at least half with the head noun (the last word: "director" in "an American
    screenwriter, director and producer"). On 60 held-out HotpotQA "both" questions the head-noun rule took `full`
    from EM 0.583 to 0.633 (5 answers gained, 2 lost where only a qualifier was missing: "Argentinian authors");
    docs/benchmarks/compose/README.md."""
    need = predicate_words(predicate)
    have = predicate_words(text)
    share = len(need & have) / max(len(need), 1)
    content = [w for w in re.findall(r"[a-z0-9]+", predicate.lower()) if w not in _PRED_STOP]
    head = singular(content[-1]) if content else None
    return share == 1.0 or (head in have and share >= 0.5), share


def same_name(answer: str, subject: str) -> bool:
    """Whether a hop's answer restates the subject it was asked about: the same words, two or more words all
    taken from the subject, or a person's name with the subject's first and last word ("Dwight H. Little" for
    "Dwight Hubbard Little"). An answer that adds to the subject ("western North Dakota") or one word of it
    ("France" of "Paris, France") is an answer."""
    wa, ws = re.findall(r"\w+", answer.lower()), re.findall(r"\w+", subject.lower())
    if not wa or not ws:
        return False
    if set(wa) == set(ws) or (len(set(wa)) >= 2 and set(wa) <= set(ws)):
        return True
    return len(wa) >= 2 and len(ws) >= 2 and wa[0] == ws[0] and wa[-1] == ws[-1]


@dataclass(slots=True)
class _Run:
    steps: list[ChainStep] = field(default_factory=list)
    calls: int = 0


class ChainRunner:
    """Runs plans with `retrieve` (a step's evidence) and `read` (a step's answer)."""

    def __init__(self, retrieve: StepRetriever, read: StepReader, config: DecomposeConfig,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.retrieve, self.read, self.config, self.clock = retrieve, read, config, clock

    def run(self, plan: Plan) -> ChainTrace:
        t0 = self.clock()
        run = _Run()
        if plan.kind == "bridge" and plan.steps:
            trace = self._bridge(plan, run)
        elif plan.kind == "comparison" and plan.chains and plan.operator is not None:
            trace = self._comparison(plan, run)
        elif plan.kind == "intersection" and len(plan.steps) >= 2:
            trace = self._intersection(plan, run)
        else:
            why = plan.notes[0] if plan.notes else f"a {plan.kind} plan has no steps the executor runs"
            trace = ChainTrace(plan, reason=why)
        return ChainTrace(trace.plan, tuple(run.steps), trace.answer, trace.citations, trace.confidence, False,
                          trace.reason, trace.failed_step, run.calls, (self.clock() - t0) * 1000)

    def _step(self, run: _Run, step: Step, previous: str, entity: str = "") -> ChainStep:
        t = self.clock()
        question = step.filled(previous)
        evidence = self.retrieve(question)
        run.calls += evidence.calls
        reading = self.read(question, evidence.passages)
        answer = reading.answer if reading.answer != ABSTAIN else ""
        failed = ""
        if not answer:
            failed = "no answer in the retrieved passages"
        elif reading.confidence < self.config.min_step_confidence:
            failed = f"reading too unsure ({reading.confidence:.3f} < {self.config.min_step_confidence})"
        elif previous and same_name(answer, previous):
            failed = f"the answer names the step's own subject ({previous})"
        done = ChainStep(question, answer, reading.passage_id, reading.confidence, evidence.retrievers,
                         (self.clock() - t) * 1000, entity, failed)
        run.steps.append(done)
        return done

    def _chain(self, run: _Run, steps: Sequence[Step], entity: str = "") -> ChainStep | None:
        """The last step's reading, or None when a step failed (it is the last in `run.steps`)."""
        previous = ""
        last: ChainStep | None = None
        for step in steps:
            last = self._step(run, step, previous, entity)
            if last.failed:
                return None
            previous = last.answer
        return last

    def _intersection(self, plan: Plan, run: _Run) -> ChainTrace:
        """Each entity's step read with its runners-up; the best-ranked pair of answers that agree (`agreed`).
        Its confidence is the weaker step's when both readings' first answers agree, half that otherwise (a
        runner-up has no calibrated probability of its own)."""
        options: list[list[tuple[str, str | None]]] = []
        for step in plan.steps:
            t = self.clock()
            evidence = self.retrieve(step.question)
            run.calls += evidence.calls
            reading = self.read(step.question, evidence.passages)
            answers = [(a, p) for a, p in [(reading.answer, reading.passage_id), *reading.alternatives]
                       if a and a != ABSTAIN]
            failed = "" if answers else "no answer in the retrieved passages"
            run.steps.append(ChainStep(step.question, reading.answer if answers else "", reading.passage_id,
                                       reading.confidence, evidence.retrievers, (self.clock() - t) * 1000,
                                       step.entity, failed))
            if failed:
                n = len(run.steps)
                return ChainTrace(plan, reason=f"step {n} ({step.entity}) failed: {failed}", failed_step=n)
            options.append(answers)
        first, second = options[0], options[1]
        pairs = sorted((i + j, i, j) for i in range(len(first)) for j in range(len(second)))
        for _, i, j in pairs:
            answer = agreed(first[i][0], second[j][0])
            if answer is None:
                continue
            confidence = min(s.confidence for s in run.steps) * (1.0 if i == j == 0 else 0.5)
            cites = tuple(dict.fromkeys(c for c in (first[i][1], second[j][1]) if c))
            return ChainTrace(plan, answer=answer, citations=cites, confidence=confidence,
                              reason=f"both readings hold {answer!r} (answers ranked {i + 1} and {j + 1})")
        shown = "; ".join(f"{s.entity}: {', '.join(a for a, _ in o)}" for s, o in zip(run.steps, options,
                                                                                     strict=False))
        return ChainTrace(plan, reason=f"the readings share no answer ({shown})", failed_step=len(run.steps))

    def _bridge(self, plan: Plan, run: _Run) -> ChainTrace:
        last = self._chain(run, plan.steps)
        if last is None:
            n = len(run.steps)
            return ChainTrace(plan, reason=f"step {n} failed: {run.steps[-1].failed}", failed_step=n)
        confidence = min(s.confidence for s in run.steps)
        cites = tuple(dict.fromkeys(s.passage_id for s in run.steps if s.passage_id))
        return ChainTrace(plan, answer=last.answer, citations=cites, confidence=confidence,
                          reason=f"{len(run.steps)} hops")

    def _check(self, run: _Run, step: Step, predicate: str) -> ChainStep:
        """A "both" check: does the entity's own passage (the retrieved one titled by it, else the first) say it is
        `predicate` (`predicate_holds`)?"""
        t = self.clock()
        evidence = self.retrieve(step.question)
        run.calls += evidence.calls
        name = step.entity.lower()
        passage = next((p for p in evidence.passages if name and name in p.title.lower()),
                       evidence.passages[0] if evidence.passages else None)
        if passage is None:
            done = ChainStep(step.question, "", None, 0.0, evidence.retrievers, (self.clock() - t) * 1000,
                             step.entity, "no passage found")
        else:
            holds, share = predicate_holds(predicate, f"{passage.title} {passage.text}")
            done = ChainStep(step.question, "yes" if holds else "no", passage.id, share if holds else 1.0 - share,
                             evidence.retrievers, (self.clock() - t) * 1000, step.entity)
        run.steps.append(done)
        return done

    def _comparison(self, plan: Plan, run: _Run) -> ChainTrace:
        assert plan.operator is not None
        values: list[str] = []
        for entity, steps in zip(plan.entities, plan.chains, strict=False):
            if plan.operator == "both" and plan.predicate:
                checked = self._check(run, steps[0], plan.predicate)
                if checked.failed:
                    n = len(run.steps)
                    return ChainTrace(plan, reason=f"step {n} ({entity}) failed: {checked.failed}", failed_step=n)
                values.append(checked.answer)
                continue
            last = self._chain(run, steps, entity)
            if last is None:
                n = len(run.steps)
                return ChainTrace(plan, reason=f"step {n} ({entity}) failed: {run.steps[-1].failed}", failed_step=n)
            values.append(last.answer)
        decision = compare(plan.operator, values)
        cites = tuple(dict.fromkeys(s.passage_id for s in run.steps if s.passage_id))
        confidence = min(s.confidence for s in run.steps)
        shown = ", ".join(f"{e}: {v}" for e, v in zip(plan.entities, values, strict=False))
        if decision.winner is not None:
            return ChainTrace(plan, answer=plan.entities[decision.winner], citations=cites, confidence=confidence,
                              reason=f"{plan.operator} of {shown}")
        if decision.yes is not None:
            return ChainTrace(plan, answer="yes" if decision.yes else "no", citations=cites, confidence=confidence,
                              reason=f"{plan.operator} of {shown}")
        return ChainTrace(plan, reason=f"no decision: {decision.reason} ({shown})", failed_step=len(run.steps))
