"""One question on its way through the engine: what every stage reads, built once per question."""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

import numpy as np

from amsrag.pipeline.systems import SystemSpec
from amsrag.pipeline.trace import ComplexityTrace, Timings


def ms_since(t: float) -> float:
    return round((time.perf_counter() - t) * 1000, 3)


@dataclass(frozen=True, slots=True)
class QueryContext:
    """One question as the stages see it.

    `question`: checked and stripped; `vector`: its encoding by the index's encoder, computed once and shared by
    the classifier, dense retrieval and MMR; `spec`: the system answering; `k`: the caller's passage count (None:
    the route's, or the adaptive cut); `knows`: the generator answers from its own knowledge (a confident
    zero_hop may skip retrieval); `explain`: trace the learned fuser's top feature contributions for this many
    leading passages; `complexity`: the classifier's view, once classified. `timings` is one dict that every stage
    adds its time to, in run order; the copies `wider` and `classified` make share it. `t0`: when the question
    arrived (the trace's total).
    """

    question: str
    vector: np.ndarray
    spec: SystemSpec
    k: int | None = None
    knows: bool = False
    explain: int = 0
    complexity: ComplexityTrace | None = None
    timings: Timings = field(default_factory=dict)
    t0: float = field(default_factory=time.perf_counter)

    def wider(self, question: str, vector: np.ndarray) -> QueryContext:
        """This context for a wider pass on `question` (this one or the corrective step's rewrite) and its vector. A
        wider pass is not explained: the trace shows the first pass's fused list only."""
        return replace(self, question=question, vector=vector, explain=0)

    def classified(self, complexity: ComplexityTrace | None) -> QueryContext:
        return replace(self, complexity=complexity)

    def timed_apart(self) -> QueryContext:
        """This context with a copy of its timings, for a step whose times must not reach this one's trace."""
        return replace(self, timings=dict(self.timings))

    def total(self) -> None:
        """Record the time since the question arrived as the timings' `total`."""
        self.timings["total"] = ms_since(self.t0)
