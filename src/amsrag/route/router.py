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
from amsrag.types import COMPLEXITIES

STRATEGIES = ("none", "A", "B", "C")
# Route order from cheapest to widest: a route "below" the right one loses evidence.
ROUTE_ORDER = {"none": 0, "A": 1, "B": 2, "C": 3}


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
            if complexity == "zero_hop" and generator_knows:
                return RoutePlan("none", (), complexity, alpha, 0, 0, False,
                                 f"alpha {alpha:.3f} >= {c.theta_high}: confident zero_hop, answer directly")
            best = c.best_retriever[complexity]
            return RoutePlan("A", (best,), complexity, alpha, c.depth["A"], c.k["A"], False,
                             f"alpha {alpha:.3f} >= {c.theta_high}: single best retriever for {complexity}")
        if strategy == "B":
            return RoutePlan("B", tuple(c.strategy_b[complexity]), complexity, alpha, c.depth["B"], c.k["B"], False,
                             f"{c.theta_low} <= alpha {alpha:.3f} < {c.theta_high}: two complementary retrievers")
        return RoutePlan("C", tuple(c.strategy_c), complexity, alpha, c.depth["C"], c.k["C"],
                         complexity == "multi_hop",
                         f"alpha {alpha:.3f} < {c.theta_low}: not confident, widest path")


def expected_costs(probs: Mapping[str, float], costs: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    """Σ_y P(y|q) C(y, route) for every route of the cost matrix (rows: true class, columns: route)."""
    routes = {r for row in costs.values() for r in row}
    return {r: sum(float(probs.get(y, 0.0)) * float(costs[y].get(r, 0.0)) for y in costs) for r in sorted(routes)}


def bayes_route(probs: Mapping[str, float], costs: Mapping[str, Mapping[str, float]]) -> str:
    """The route minimising expected cost; ties go to the wider route (uncertain -> wider)."""
    expected = expected_costs(probs, costs)
    return min(expected, key=lambda r: (round(expected[r], 12), -ROUTE_ORDER.get(r, 0)))
