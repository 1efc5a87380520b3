"""Threshold routing (paper eq. 6) with a reject option, and the Bayes decision under a cost matrix.

    alpha >= theta_high            -> Strategy A: the single best retriever for c
                                      (no retrieval for zero_hop when the generator answers
                                      from its own knowledge)
    theta_low <= alpha < theta_high -> Strategy B: two complementary retrievers (dense + bm25;
                                      dense + graph for multi_hop)
    alpha < theta_low               -> Strategy C: dense + bm25 + graph (+ the multi-hop path
                                      when c = multi_hop): when unsure, take the widest path
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from amsrag.config import RouterConfig
from amsrag.errors import InputError
from amsrag.types import COMPLEXITIES, Complexity

STRATEGIES = ("none", "A", "B", "C")
# Route order from cheapest to widest: a route "below" the right one loses evidence.
ROUTE_ORDER = {"none": 0, "A": 1, "B": 2, "C": 3}
PATH_ORDER = {"none": 0, "single": 1, "linked": 2}


@dataclass(frozen=True, slots=True)
class RoutePlan:
    strategy: str  # none | A | B | C
    retrievers: tuple[str, ...]
    complexity: str
    alpha: float
    depth: int  # candidates fetched per retriever
    k: int  # passages handed on after fusion
    multi_hop: bool  # run the second-hop expansion
    reason: str

    @property
    def evidence_path(self) -> str:
        """What evidence this plan can reach: none, single passages, or linked passages (graph/second hop)."""
        return evidence_path(self.retrievers, self.multi_hop)


def evidence_path(retrievers: tuple[str, ...] | list[str], multi_hop: bool) -> str:
    if not retrievers:
        return "none"
    return "linked" if multi_hop or "graph" in retrievers else "single"


class Router:
    def __init__(self, config: RouterConfig | None = None) -> None:
        self.config = config or RouterConfig()
        if not self.config.theta_low < self.config.theta_high:
            raise InputError(f"router thresholds need theta_low < theta_high, got "
                             f"{self.config.theta_low} / {self.config.theta_high}")

    def strategy_for(self, alpha: float) -> str:
        c = self.config
        if alpha >= c.theta_high:
            return "A"
        return "B" if alpha >= c.theta_low else "C"

    def route(self, complexity: str, alpha: float, generator_knows: bool = False) -> RoutePlan:
        """The plan for a classified query. `generator_knows`: the generator can answer from its own
        knowledge (only then does a confident zero_hop skip retrieval)."""
        if complexity not in COMPLEXITIES:
            raise InputError(f"unknown complexity {complexity!r}; expected one of {', '.join(COMPLEXITIES)}")
        if not 0.0 <= alpha <= 1.0:
            raise InputError(f"alpha must lie in [0, 1], got {alpha}")
        c = self.config
        strategy = self.strategy_for(alpha)
        if strategy == "A":
            reason = (f"alpha {alpha:.3f} >= {c.theta_high}: confident zero_hop, answer directly"
                      if complexity == "zero_hop" and generator_knows
                      else f"alpha {alpha:.3f} >= {c.theta_high}: single best retriever for {complexity}")
        elif strategy == "B":
            reason = f"{c.theta_low} <= alpha {alpha:.3f} < {c.theta_high}: two complementary retrievers"
        else:
            reason = f"alpha {alpha:.3f} < {c.theta_low}: not confident, widest path"
        return self.plan(strategy, complexity, alpha, generator_knows, reason)

    def plan(self, strategy: str, complexity: str, alpha: float = 1.0, generator_knows: bool = False,
             reason: str = "") -> RoutePlan:
        """Strategy `strategy` configured for class `complexity`."""
        c = self.config
        expand = complexity == "multi_hop" and strategy in c.expand_strategies
        if strategy == "A":
            if complexity == "zero_hop" and generator_knows:
                return RoutePlan("none", (), complexity, alpha, 0, 0, False, reason)
            return RoutePlan("A", (c.best_retriever[complexity],), complexity, alpha, c.depth["A"], c.k["A"], expand,
                             reason)
        if strategy == "B":
            return RoutePlan("B", tuple(c.strategy_b[complexity]), complexity, alpha, c.depth["B"], c.k["B"], expand,
                             reason)
        if strategy == "C":
            return RoutePlan("C", tuple(c.strategy_c), complexity, alpha, c.depth["C"], c.k["C"], expand, reason)
        raise InputError(f"unknown strategy {strategy!r}; expected A, B or C")

    def wider(self, plan: RoutePlan) -> RoutePlan | None:
        """The next wider plan for the same class (escalation), or None at the widest."""
        order = ["none", "A", "B", "C"]
        i = order.index(plan.strategy)
        if plan.strategy == "C" and plan.complexity != "multi_hop":  # widest one-hop path -> the multi-hop path
            return self.plan("C", "multi_hop", plan.alpha, reason=f"escalated from C/{plan.complexity}")
        if i + 1 >= len(order):
            return None
        return self.plan(order[i + 1], plan.complexity, plan.alpha, reason=f"escalated from {plan.strategy}")

    def route_cost(self, plan: RoutePlan, true_class: str) -> float:
        """C(true class, evidence path of the plan) + call_cost per activated retriever."""
        c = self.config
        return float(c.cost_matrix[true_class][plan.evidence_path]) + c.call_cost * len(plan.retrievers)

    def expected_cost(self, plan: RoutePlan, probs: Mapping[str, float]) -> float:
        return sum(float(probs.get(y, 0.0)) * self.route_cost(plan, y) for y in COMPLEXITIES)

    def bayes_route(self, complexity: str, probs: Mapping[str, float], generator_knows: bool = False) -> RoutePlan:
        """The plan minimising Σ_y P(y|q) C(y, plan) over the strategies for the predicted class; ties go wider."""
        alpha = max(probs.values(), default=0.0)
        candidates = [self.plan(s, complexity, alpha, generator_knows) for s in ("A", "B", "C")]
        costs = [self.expected_cost(p, probs) for p in candidates]
        best = min(range(len(candidates)), key=lambda i: (round(costs[i], 12), -i))
        plan = candidates[best]
        reason = "Bayes decision, expected cost " + ", ".join(
            f"{p.strategy} {cost:.3f}" for p, cost in zip(candidates, costs, strict=True))
        return RoutePlan(plan.strategy, plan.retrievers, plan.complexity, plan.alpha, plan.depth, plan.k,
                         plan.multi_hop, reason)


def retrieval_class(label: Complexity, probs: Mapping[str, float], alpha: float,
                    generator_knows: bool) -> tuple[Complexity, float]:
    """The class and confidence retrieval is configured by.

    zero_hop means "this generator answers from its own knowledge". For a generator that cannot
    (the extractive default), retrieval must follow the question's hop structure instead: the
    larger of one_hop / multi_hop, with its confidence renormalised over the two.
    """
    if label != "zero_hop" or generator_knows:
        return label, alpha
    one, multi = float(probs.get("one_hop", 0.0)), float(probs.get("multi_hop", 0.0))
    if one + multi <= 0:
        return "one_hop", 0.5
    hop: Complexity = "multi_hop" if multi > one else "one_hop"
    return hop, max(one, multi) / (one + multi)
