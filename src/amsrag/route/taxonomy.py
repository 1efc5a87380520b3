"""The five-way decision (seed 001 §3, seed 003's vectorless route): which route a classified question takes.

The hop classes (zero/one/multi_hop) take the retrieval strategies A/B/C of `Router`; aggregation takes
the global route (corpus themes), structured the table route (SQL). A class's own route is taken when its
calibrated probability reaches `min_confidence`; otherwise the question goes down the text path, where the
corrective step can still widen it. `tune_min_confidence` fits those thresholds on labelled questions
under the task cost matrix (what `amsrag train taxonomy train` records in the artifact card).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from amsrag.config import TaxonomyConfig
from amsrag.types import COMPLEXITIES, TASK_KINDS

THRESHOLD_GRID = tuple(round(x, 2) for x in np.arange(0.05, 0.96, 0.05))


@dataclass(frozen=True, slots=True)
class TaxonomyDecision:
    label: str  # the class the question is routed as (one of the taxonomy's classes)
    probs: dict[str, float]  # the five-way (or smaller) distribution
    alpha: float  # calibrated probability of `label`
    route: str  # retrieval | global | table
    reason: str
    task: dict[str, Any]  # the task head's prediction (TaskPrediction.to_dict())
    tables: tuple[tuple[str, float], ...] = ()  # (table id, match score) of the best tables consulted

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "probs": {k: round(v, 4) for k, v in self.probs.items()},
                "alpha": round(self.alpha, 4), "route": self.route, "reason": self.reason, "task": self.task,
                "tables": [{"id": t, "score": round(s, 4)} for t, s in self.tables]}


def thresholds_of(config: TaxonomyConfig, fitted: Mapping[str, float]) -> dict[str, float]:
    """The thresholds in force: the configuration's, else the task head card's (`fitted`), else 0.5."""
    return {c: float(config.min_confidence.get(c, fitted.get(c, 0.5))) for c in config.task_classes}


def decide(probs: Mapping[str, float], config: TaxonomyConfig,
           thresholds: Mapping[str, float] | None = None) -> tuple[str, str, float, str]:
    """(class, route, alpha, reason) from the taxonomy's probabilities."""
    th = thresholds if thresholds is not None else thresholds_of(config, {})
    own = [(probs.get(c, 0.0), c) for c in config.task_classes]
    ready = [(p, c) for p, c in own if p >= th.get(c, 0.5)]
    if ready:
        p, c = max(ready)
        route = config.routes[c]
        return c, route, p, f"p({c}) {p:.3f} >= {th.get(c, 0.5)}: {route} route"
    hop = max(COMPLEXITIES, key=lambda c: probs.get(c, 0.0))
    text = sum(probs.get(c, 0.0) for c in COMPLEXITIES)
    why = ", ".join(f"p({c}) {p:.3f} < {th.get(c, 0.5)}" for p, c in own) or "three classes"
    return hop, "retrieval", probs.get(hop, 0.0) / text if text > 0 else 0.0, f"text path ({why})"


def route_of_task(p_task: np.ndarray, thresholds: Mapping[str, float]) -> np.ndarray:
    """Route index (into TASK_KINDS order: text→retrieval, aggregation→global, structured→table) per row."""
    n = p_task.shape[0]
    out = np.zeros(n, dtype=int)
    best = np.zeros(n)
    for j, kind in enumerate(TASK_KINDS):
        if kind == "text":
            continue
        ok = (p_task[:, j] >= thresholds.get(kind, 0.5)) & (p_task[:, j] > best)
        out[ok] = j
        best[ok] = p_task[ok, j]
    return out


def task_cost(p_task: np.ndarray, labels: np.ndarray, thresholds: Mapping[str, float],
              costs: Mapping[str, Mapping[str, float]]) -> float:
    """Mean cost of routing by `thresholds` on labelled rows (labels: indexes into TASK_KINDS)."""
    routes = ("retrieval", "global", "table")
    chosen = route_of_task(p_task, thresholds)
    matrix = np.array([[costs[t][r] for r in routes] for t in TASK_KINDS])
    return float(matrix[labels, chosen].mean())


def tune_min_confidence(p_task: np.ndarray, labels: np.ndarray, costs: Mapping[str, Mapping[str, float]],
                        classes: Sequence[str] = ("aggregation", "structured")) -> dict[str, float]:
    """Per-class thresholds minimising the mean task cost, by coordinate search over THRESHOLD_GRID (ties go
    to the threshold closest to 0.5)."""
    th = {c: 0.5 for c in classes}
    for _ in range(2):
        for c in classes:
            scores = []
            for t in THRESHOLD_GRID:
                trial = {**th, c: t}
                scores.append((round(task_cost(p_task, labels, trial, costs), 9), abs(t - 0.5), t))
            th[c] = min(scores)[2]
    return th
