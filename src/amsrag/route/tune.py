"""`amsrag route tune`: thresholds (theta_high, theta_low) and retriever priors beta from calibration queries.

Thresholds minimise the mean routing cost over the calibration queries — C(true class, evidence path
of the route the thresholds give the predicted class) plus `call_cost` per activated retriever —
subject to a cap on the multi_hop miss rate (multi_hop questions sent down a path that cannot reach
linked passages); ties go to the wider setting. beta_r^(c): per predicted class c, retriever r's
mean nDCG@10 of the gold passages, normalised over the retrievers. Both are then frozen in the index configuration.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from amsrag.config import RouterConfig
from amsrag.errors import InputError
from amsrag.route.router import Router, retrieval_class
from amsrag.types import COMPLEXITIES, RETRIEVERS, Complexity, QAExample

# The paper's coarse grid and a finer one around it.
COARSE_HIGH = (0.80, 0.85, 0.90, 0.92, 0.95)
COARSE_LOW = (0.50, 0.55, 0.60, 0.62, 0.65)
FINE = tuple(round(x, 2) for x in np.arange(0.40, 0.991, 0.01))


@dataclass(frozen=True, slots=True)
class CalibrationQuery:
    true_class: str
    predicted: Complexity
    alpha: float
    ndcg: Mapping[str, float]  # per retriever, nDCG@10 of the gold passages (empty when no gold)


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
    """Per predicted class, each retriever's mean nDCG@10 normalised to sum 1 (uniform when unseen)."""
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


def ndcg10(ranked: Sequence[str], gold: Sequence[str]) -> float:
    g = set(gold)
    dcg = sum(1 / math.log2(i + 2) for i, pid in enumerate(ranked[:10]) if pid in g)
    return dcg / sum(1 / math.log2(i + 2) for i in range(min(len(g), 10)))


def calibration_queries(engine, questions: Sequence[QAExample],
                        progress: Callable[[int], None] | None = None) -> list[CalibrationQuery]:
    """Classify every question and, where its gold passages are indexed, score each retriever on it."""
    out = []
    for q in questions:
        if q.complexity not in COMPLEXITIES:
            continue
        vec = engine.index.encoder.encode_query(q.question)
        pred = engine.classifier.predict(q.question, query_vector=vec)
        ndcg: dict[str, float] = {}
        if q.gold_passage_ids and len(engine.index.rows_for_ids(q.gold_passage_ids)) == len(q.gold_passage_ids):
            for r in RETRIEVERS:
                hits = engine.index.retriever(r).search(q.question, k=10, query_vector=vec)
                ndcg[r] = ndcg10([h.id for h in hits], q.gold_passage_ids)
        label, alpha = retrieval_class(pred.label, pred.probs, pred.alpha, engine.generator_knows)
        out.append(CalibrationQuery(q.complexity, label, alpha, ndcg))
        if progress is not None:
            progress(1)
    return out


def write_curve(path: Path, best: ThresholdPoint, curve: Sequence[ThresholdPoint], beta: dict, n: int) -> None:
    path.write_text(json.dumps({"queries": n, "best": asdict(best), "beta_by_class": beta,
                                "curve": [asdict(p) for p in curve]}, indent=1), encoding="utf-8")
