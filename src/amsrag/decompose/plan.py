"""A question's decomposition: a small typed plan the chain executor runs step by step."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

PlanKind = Literal["single", "bridge", "comparison", "intersection", "implicit"]
PLAN_KINDS: tuple[PlanKind, ...] = ("single", "bridge", "comparison", "intersection", "implicit")
MULTI_STEP: frozenset[str] = frozenset({"bridge", "comparison", "intersection", "implicit"})
# earlier/later: dates; more/less: numbers; same/different: two values compared as strings; both: yes/no checks
Operator = Literal["earlier", "later", "more", "less", "same", "different", "both"]
ValueKind = Literal["date", "number", "text", "yesno"]
SLOT = "#1"  # a bridge step's place for the previous step's answer
MAX_HOPS = 4


@dataclass(frozen=True, slots=True)
class Step:
    """One sub-question. `entity`: the compared entity a comparison step asks about; a bridge step's question
    may hold `#1`, filled with the previous step's answer before it is asked."""

    question: str
    entity: str = ""

    def filled(self, previous: str) -> str:
        return self.question.replace(SLOT, previous)


@dataclass(frozen=True, slots=True)
class Plan:
    """How a question is answered. `single`: read as it is. `bridge`: `steps` in order, each filling the next
    one's `#1`. `comparison`: per entity, its steps (`chains`, the last step reads the compared attribute),
    then `operator` over the typed values. `intersection`: one step per entity (`steps`, each with its `entity`),
    whose answers must agree. `implicit`: a
    yes/no question reached through facts (`steps` when a decomposer can write them)."""

    kind: PlanKind
    probs: dict[str, float]
    steps: tuple[Step, ...] = ()
    chains: tuple[tuple[Step, ...], ...] = ()  # comparison: one chain of steps per entity
    entities: tuple[str, ...] = ()
    operator: Operator | None = None
    value: ValueKind = "text"
    predicate: str = ""  # "both": what each entity must be ("board games"), checked in its own passage
    decided_by: str = "tagger"
    notes: tuple[str, ...] = field(default=(), compare=False)

    @property
    def confidence(self) -> float:
        return float(self.probs.get(self.kind, 0.0))

    @property
    def multi_step(self) -> bool:
        return self.kind in MULTI_STEP

    @property
    def multi_hop_probability(self) -> float:
        """The decomposer's probability that the question needs more than one passage."""
        return float(sum(p for k, p in self.probs.items() if k in MULTI_STEP))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "confidence": round(self.confidence, 4),
                               "probs": {k: round(v, 4) for k, v in self.probs.items()},
                               "decided_by": self.decided_by}
        if self.steps:
            out["steps"] = [s.question for s in self.steps]
        if self.chains:
            out["chains"] = [[s.question for s in chain] for chain in self.chains]
        if self.entities:
            out["entities"] = list(self.entities)
        if self.operator is not None:
            out["operator"] = self.operator
            out["value"] = self.value
        if self.predicate:
            out["predicate"] = self.predicate
        if self.notes:
            out["notes"] = list(self.notes)
        return out
