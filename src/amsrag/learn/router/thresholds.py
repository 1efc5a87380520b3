"""Router thresholds (theta_high, theta_low) by expected routing cost under a cap on the multi_hop miss rate, and
the one-vector beta fit."""


from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from amsrag.config import RouterConfig
from amsrag.errors import InputError
from amsrag.learn.router.calibration import CalibrationQuery
from amsrag.route.router import Router
from amsrag.types import COMPLEXITIES, RETRIEVERS, Complexity

COARSE_HIGH = (0.80, 0.85, 0.90, 0.92, 0.95)
COARSE_LOW = (0.50, 0.55, 0.60, 0.62, 0.65)
FINE = tuple(round(x, 2) for x in np.arange(0.40, 0.991, 0.01))



@dataclass(frozen=True, slots=True)
class ThresholdPoint:
    theta_high: float
    theta_low: float
    loss: float
    miss_rate: float
    route_mix: dict[str, int]


def route_of(predicted: str, alpha: float, theta_high: float, theta_low: float, generator_knows: bool) -> str:
    if alpha >= theta_high:
        return "none" if predicted == "zero_hop" and generator_knows else "A"
    return "B" if alpha >= theta_low else "C"


def evaluate_thresholds(queries: Sequence[CalibrationQuery], router: RouterConfig, theta_high: float,
                        theta_low: float, generator_knows: bool = False) -> ThresholdPoint:
    r = Router(router.model_copy(update={"theta_high": theta_high, "theta_low": theta_low}))
    total, misses, multi = 0.0, 0, 0
    mix: dict[str, int] = defaultdict(int)
    for q in queries:
        route = route_of(q.predicted, q.alpha, theta_high, theta_low, generator_knows)
        mix[route] += 1
        plan = r.plan("A" if route == "none" else route, q.predicted, q.alpha, generator_knows)
        total += r.route_cost(plan, q.true_class)
        if q.true_class == "multi_hop":
            multi += 1
            misses += plan.evidence_path != "linked"
    return ThresholdPoint(theta_high, theta_low, total / max(1, len(queries)), misses / multi if multi else 0.0,
                          dict(sorted(mix.items())))


def tune_thresholds(queries: Sequence[CalibrationQuery], router: RouterConfig,
                    miss_cap: float = 0.05, generator_knows: bool = False,
                    grid: Sequence[tuple[float, float]] | None = None) -> tuple[ThresholdPoint, list[ThresholdPoint]]:
    """Best (theta_high, theta_low) by expected loss under the miss-rate cap, and the whole curve."""
    if not queries:
        raise InputError("no calibration queries with a known complexity class to tune on")
    if grid is None:
        pairs = {(h, lo) for h in COARSE_HIGH for lo in COARSE_LOW if lo < h}
        pairs |= {(h, lo) for h in FINE for lo in FINE if lo < h}
        grid = sorted(pairs)
    curve = [evaluate_thresholds(queries, router, h, lo, generator_knows) for h, lo in grid]
    feasible = [p for p in curve if p.miss_rate <= miss_cap] or curve  # no feasible point: least loss overall
    best = min(feasible, key=lambda p: (round(p.loss, 12), p.miss_rate, -p.theta_high, -p.theta_low))
    return best, curve


def fit_beta(queries: Sequence[CalibrationQuery],
             retrievers: Sequence[str] = RETRIEVERS) -> dict[Complexity, dict[str, float]]:
    """The former fit: per predicted class, each retriever's mean nDCG@10 normalised to sum 1 (uniform when
    unseen). Superseded by `fit_priors`; kept as a reference point."""
    sums: dict[Complexity, dict[str, list[float]]] = {c: {r: [] for r in retrievers} for c in COMPLEXITIES}
    for q in queries:
        for r in retrievers:
            if r in q.ndcg:
                sums[q.predicted][r].append(q.ndcg[r])
    beta: dict[Complexity, dict[str, float]] = {}
    for c, per in sums.items():
        means = {r: float(np.mean(v)) if v else 0.0 for r, v in per.items()}
        total = sum(means.values())
        beta[c] = ({r: round(m / total, 6) for r, m in means.items()} if total > 0
                   else {r: round(1 / len(retrievers), 6) for r in retrievers})
    return beta


