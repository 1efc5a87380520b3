"""`amsrag train route tune`: thresholds, per-class routes, CA-RRF priors and the MMR gate from calibration queries.

One pass over the questions (`calibration_queries`: the classifier and each retriever's ranked list at the
routes' depth) feeds every fit, computed offline:

* thresholds (theta_high, theta_low) minimise the mean routing cost over the calibration queries —
  C(true class, evidence path of the route the thresholds give the predicted class) plus `call_cost` per
  activated retriever — subject to a cap on the multi_hop miss rate; ties go to the wider setting.
* routes: per predicted class c, Strategy A's retriever = the best mean nDCG@5 alone, Strategy B's pair =
  the best mean nDCG@5 fused by CA-RRF with c's priors (ties keep the configured choice).
* priors: per predicted class c, beta_r^(c) (a simplex grid) and k_r(c) (coordinate search over a small
  set) maximising the mean CA-RRF nDCG@5 of the gold passages — the mean of two objectives: each query
  fused over the retrievers its route activates (systems A3/A4/full) and over all three (system A1), as
  one set of priors serves both; ties keep uniform beta and the default k.
* MMR: the gate (always / redundant / off), its redundancy threshold and lambda maximising the mean
  nDCG@5 of the routed CA-RRF lists (ties: fewer MMR runs, then lambda nearer the default).

Order: thresholds -> priors -> routes -> thresholds (the routes change evidence paths) -> priors -> MMR.
Offline fusion replays the pipeline (a seeded retriever is seeded from the route's other lists) except
the multi_hop second hop, which needs the index: the fits see the lists before it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from amsrag.config import AmsragConfig
from amsrag.errors import InputError
from amsrag.learn.router.bench import Bench
from amsrag.learn.router.calibration import CalibrationQuery, calibration_queries
from amsrag.learn.router.mmr import MMRFit, fit_mmr, pool_outcomes
from amsrag.learn.router.priors import ClassPriorFit, ClassRouteFit, choose_routes, fit_priors
from amsrag.learn.router.thresholds import ThresholdPoint, tune_thresholds
from amsrag.progress import NullProgress, Progress
from amsrag.types import Complexity, QAExample

if TYPE_CHECKING:
    from amsrag.evaluate.builder import EvalQuery
    from amsrag.pipeline import Engine


@dataclass(frozen=True, slots=True)
class Tuning:
    config: AmsragConfig
    best: ThresholdPoint
    curve: list[ThresholdPoint]
    priors: dict[Complexity, ClassPriorFit]
    routes: dict[Complexity, ClassRouteFit]
    mmr: MMRFit | None

    def summary(self) -> dict[str, Any]:
        f, r = self.config.fusion, self.config.router
        out: dict[str, Any] = {
            "theta_high": self.best.theta_high, "theta_low": self.best.theta_low,
            "expected_loss": round(self.best.loss, 4), "multi_hop_miss_rate": round(self.best.miss_rate, 4),
            "route_mix": self.best.route_mix,
            "beta_by_class": {c: dict(v) for c, v in f.beta_by_class.items()},
            "k_by_class": {c: dict(v) for c, v in f.k_by_class.items()},
            "priors_fit": {c: asdict(p) for c, p in self.priors.items()},
            "best_retriever": dict(r.best_retriever), "strategy_b": {c: list(v) for c, v in r.strategy_b.items()},
            "routes_fit": {c: asdict(p) for c, p in self.routes.items()},
            "mmr_gate": f.mmr_gate, "mmr_redundancy": f.mmr_redundancy, "mmr_lambda": f.mmr_lambda,
        }
        if self.mmr is not None:
            out["mmr_fit"] = asdict(self.mmr)
        return out


def tune(config: AmsragConfig, queries: Sequence[CalibrationQuery], miss_cap: float = 0.05,
         generator_knows: bool = False,
         vectors_for_rows: Callable[[Sequence[int]], np.ndarray] | None = None) -> Tuning:
    """Every fit in order (module doc); `vectors_for_rows` (the index's) enables the MMR fit."""
    new = config.model_copy(deep=True)
    best, curve = tune_thresholds(queries, new.router, miss_cap, generator_knows)
    _set_thresholds(new, best)
    bench = Bench(queries, new.fusion.kappa, new.fusion.alpha0)
    _set_priors(new, fit_priors(queries, new.router, new.fusion, generator_knows, bench=bench))
    routes = choose_routes(queries, new.router, new.fusion, bench=bench)
    for c, fit in routes.items():
        if fit.queries:
            new.router.best_retriever[c], new.router.strategy_b[c] = fit.best_retriever, fit.strategy_b
    best, curve = tune_thresholds(queries, new.router, miss_cap, generator_knows)
    _set_thresholds(new, best)
    priors = fit_priors(queries, new.router, config.fusion, generator_knows, bench=bench)  # before = the input's
    _set_priors(new, priors)
    mmr_fit = None
    if vectors_for_rows is not None:
        mmr_fit = fit_mmr(pool_outcomes(bench, new.router, new.fusion, generator_knows, vectors_for_rows),
                          config.fusion.mmr_lambda)
        if mmr_fit.queries:
            new.fusion.mmr_gate = mmr_fit.gate  # type: ignore[assignment]
            new.fusion.mmr_lambda = mmr_fit.lam
            if mmr_fit.gate == "redundant":
                new.fusion.mmr_redundancy = mmr_fit.threshold
    return Tuning(AmsragConfig.model_validate(new.model_dump()), best, curve, priors, routes, mmr_fit)


def _set_thresholds(config: AmsragConfig, best: ThresholdPoint) -> None:
    config.router.theta_high, config.router.theta_low = best.theta_high, best.theta_low


def _set_priors(config: AmsragConfig, priors: Mapping[Complexity, ClassPriorFit]) -> None:
    for c, fit in priors.items():
        config.fusion.beta_by_class[c] = dict(fit.beta)
        config.fusion.k_by_class[c] = dict(fit.k)


def write_curve(path: Path, best: ThresholdPoint, curve: Sequence[ThresholdPoint], beta: dict, n: int,
                tuning: Mapping[str, Any] | None = None) -> None:
    doc: dict[str, Any] = {"queries": n, "best": asdict(best), "beta_by_class": beta}
    if tuning is not None:
        doc["tuning"] = dict(tuning)
    doc["curve"] = [asdict(p) for p in curve]
    path.write_text(json.dumps(doc, indent=1), encoding="utf-8")


def tune_on_calibration(engine: Engine, calibration: Sequence[EvalQuery], progress: Progress | None = None,
                        miss_cap: float = 0.05) -> tuple[Any, dict[str, Any]]:
    """`train route tune` in memory on calibration questions (disjoint from the eval queries): the engine's config
    with the tuned thresholds, routes, CA-RRF priors and MMR gate, and what was tuned (fitted values and
    calibration nDCG@5 before / after). The index on disk is not changed."""
    questions = [QAExample(id=q.id, question=q.question, answers=q.answers, gold_passage_ids=q.gold,
                           dataset=q.dataset, complexity=q.complexity) for q in calibration if q.complexity]  # type: ignore[arg-type]
    if not questions:
        raise InputError("--tune: the benchmark has no calibration questions with a known class "
                         "(every usable question is an eval query; lower --sizes)")
    progress = progress or NullProgress()
    with progress.task("route tune (calibration questions)", len(questions)) as advance:
        cal = calibration_queries(engine, questions, advance)
    tuning = tune(engine.config, cal, miss_cap, engine.generator_knows, engine.index.vectors_for_rows)
    return tuning.config, {"calibration_questions": len(cal), "miss_cap": miss_cap, **tuning.summary()}
