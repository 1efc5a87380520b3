"""Per-class CA-RRF priors (beta_r^(c) on a simplex grid, k_r(c) by coordinate search) and per-class routes,
each maximising mean nDCG@5 of the gold passages over the calibration questions."""


from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations

import numpy as np

from amsrag.config import FusionConfig, RouterConfig
from amsrag.errors import InputError
from amsrag.learn.router.bench import Bench, Scenario, ScenarioEval
from amsrag.learn.router.calibration import CalibrationQuery
from amsrag.route.router import Router
from amsrag.types import COMPLEXITIES, RETRIEVERS, Complexity

K_GRID = (10.0, 20.0, 40.0, 60.0, 80.0, 120.0)  # candidate k_r(c)
BETA_STEP = 0.1


def beta_grid(step: float = BETA_STEP, n: int = len(RETRIEVERS)) -> np.ndarray:
    """Uniform first, then the simplex grid of step `step` (lexicographic)."""
    m = round(1 / step)
    if abs(m * step - 1) > 1e-9:
        raise InputError(f"beta grid step must divide 1, got {step}")
    points = [np.full(n, 1.0 / n)]
    points += [np.array(c, dtype=float) / m for c in _compositions(m, n)]
    return np.array(points)


def _compositions(total: int, parts: int) -> list[tuple[int, ...]]:
    if parts == 1:
        return [(total,)]
    return [(i, *rest) for i in range(total + 1) for rest in _compositions(total - i, parts - 1)]


# ---------------------------------------------------------------- priors


@dataclass(frozen=True, slots=True)
class ClassPriorFit:
    queries: int
    beta: dict[str, float]
    k: dict[str, float]
    before: dict[str, float]  # nDCG@5 routed / all three / objective with the priors in the config
    after: dict[str, float]


def scenarios(bench: Bench, positions: Sequence[int], router: RouterConfig,
              generator_knows: bool) -> dict[str, Scenario]:
    """The routed scenario (each query over its route's retrievers at the thresholds) and the all-three one."""
    r = Router(router)
    routed_pos, routed_act, routed_depth = [], [], []
    for p in positions:
        q = bench.queries[p]
        plan = r.route(q.predicted, q.alpha, generator_knows)
        if plan.retrievers:
            routed_pos.append(p)
            routed_act.append(tuple(plan.retrievers))
            routed_depth.append(plan.depth)
    everything = tuple(RETRIEVERS)
    fixed = router.depth.get("fixed", router.depth["C"])
    return {"routed": Scenario(tuple(routed_pos), tuple(routed_act), tuple(routed_depth)),
            "all": Scenario(tuple(positions), tuple(everything for _ in positions), tuple(fixed for _ in positions))}


class PriorObjective:
    """The mean over the scenarios with queries of their mean CA-RRF nDCG@5."""

    def __init__(self, bench: Bench, scs: Mapping[str, Scenario]) -> None:
        self.evals = {name: ScenarioEval(bench, sc) for name, sc in scs.items() if sc.positions}

    def per_scenario(self, betas: np.ndarray, k: Sequence[float]) -> dict[str, np.ndarray]:
        return {name: ev.scores(betas, k).ndcg.mean(axis=1) for name, ev in self.evals.items()}

    def __call__(self, betas: np.ndarray, k: Sequence[float]) -> np.ndarray:
        per = self.per_scenario(betas, k)
        return np.mean(np.stack(list(per.values())), axis=0) if per else np.zeros(len(betas))

    def report(self, beta: np.ndarray, k: Sequence[float]) -> dict[str, float]:
        per = {name: float(v[0]) for name, v in self.per_scenario(beta[None], k).items()}
        out = {f"ndcg@5_{name}": round(v, 4) for name, v in sorted(per.items())}
        out["objective"] = round(float(np.mean(list(per.values()))) if per else 0.0, 4)
        return out


def _best_beta(objective: PriorObjective, betas: np.ndarray, k: Sequence[float]) -> tuple[int, float]:
    """Index of the best beta (ties: the first, i.e. uniform, then grid order) and its objective."""
    values = np.round(objective(betas, k), 12)
    i = int(np.argmax(values))
    return i, float(values[i])


def _search_priors(objective: PriorObjective, betas: np.ndarray, k0: list[float],
                   k_grid: Sequence[float]) -> tuple[np.ndarray, list[float]]:
    """Coordinate search over k_r (from the defaults, strict gains only) with the best beta for each k."""
    k = list(k0)
    bi, best = _best_beta(objective, betas, k)
    for _ in range(3):
        moved = False
        for j in range(len(RETRIEVERS)):
            for kv in k_grid:
                if kv == k[j]:
                    continue
                trial = [*k[:j], float(kv), *k[j + 1:]]
                ti, value = _best_beta(objective, betas, trial)
                if value > best + 1e-12:
                    k, bi, best, moved = trial, ti, value, True
        if not moved:
            break
    return betas[bi], k


def fit_priors(queries: Sequence[CalibrationQuery], router: RouterConfig, fusion: FusionConfig,
               generator_knows: bool = False, k_grid: Sequence[float] = K_GRID, step: float = BETA_STEP,
               bench: Bench | None = None) -> dict[Complexity, ClassPriorFit]:
    """beta_r^(c) and k_r(c) per predicted class maximising the CA-RRF nDCG@5 objective (see the module doc)."""
    bench = bench or Bench(queries, fusion.kappa, fusion.alpha0)
    defaults = FusionConfig().k_by_class
    betas = beta_grid(step)
    out: dict[Complexity, ClassPriorFit] = {}
    for c in COMPLEXITIES:
        positions = [i for i, q in enumerate(bench.queries) if q.predicted == c and q.gold and q.lists]
        k0 = [float(defaults.get(c, {}).get(r, fusion.rrf_k)) for r in RETRIEVERS]
        if not positions:
            out[c] = ClassPriorFit(0, _named(betas[0]), _named(np.array(k0)), {}, {})
            continue
        objective = PriorObjective(bench, scenarios(bench, positions, router, generator_knows))
        current = fusion.beta_by_class.get(c, {})
        cur_beta = np.array([float(current.get(r, 0.0)) for r in RETRIEVERS])
        cur_k = [float(fusion.k_by_class.get(c, {}).get(r, fusion.rrf_k)) for r in RETRIEVERS]
        beta, k = _search_priors(objective, betas, k0, k_grid)
        out[c] = ClassPriorFit(len(positions), _named(beta), _named(np.array(k)),
                               objective.report(cur_beta, cur_k), objective.report(beta, k))
    return out


def _named(values: np.ndarray) -> dict[str, float]:
    return {r: round(float(v), 6) for r, v in zip(RETRIEVERS, values, strict=True)}


# ---------------------------------------------------------------- routes


@dataclass(frozen=True, slots=True)
class ClassRouteFit:
    queries: int
    best_retriever: str
    strategy_b: list[str]
    single: dict[str, float]  # mean nDCG@5 of each retriever alone
    pairs: dict[str, float]  # mean CA-RRF nDCG@5 of each pair ("bm25+dense")


def choose_routes(queries: Sequence[CalibrationQuery], router: RouterConfig, fusion: FusionConfig,
                  bench: Bench | None = None) -> dict[Complexity, ClassRouteFit]:
    """Per predicted class: Strategy A's retriever and Strategy B's pair by mean nDCG@5 (ties keep the config)."""
    bench = bench or Bench(queries, fusion.kappa, fusion.alpha0)
    out: dict[Complexity, ClassRouteFit] = {}
    for c in COMPLEXITIES:
        positions = tuple(i for i, q in enumerate(bench.queries) if q.predicted == c and q.gold and q.lists)
        beta = np.array([[float(fusion.beta_by_class.get(c, {}).get(r, 0.0)) for r in RETRIEVERS]])
        k = [float(fusion.k_by_class.get(c, {}).get(r, fusion.rrf_k)) for r in RETRIEVERS]
        single: dict[str, float] = {r: _mean_ndcg(bench, positions, (r,), router.depth["A"], beta, k)
                                    for r in RETRIEVERS}
        pairs = {"+".join(p): _mean_ndcg(bench, positions, p, router.depth["B"], beta, k)
                 for p in combinations(RETRIEVERS, 2)}
        a = _pick(single, router.best_retriever.get(c, ""))
        configured = list(router.strategy_b.get(c, []))
        b = _pick(pairs, "+".join(sorted(configured)))
        pair = configured if sorted(configured) == b.split("+") else b.split("+")  # unchanged: the configured order
        out[c] = ClassRouteFit(len(positions), a, pair,
                               {n: round(v, 4) for n, v in single.items()}, {n: round(v, 4) for n, v in pairs.items()})
    return out


def _mean_ndcg(bench: Bench, positions: tuple[int, ...], activated: tuple[str, ...], depth: int,
               beta: np.ndarray, k: Sequence[float]) -> float:
    if not positions:
        return 0.0
    sc = Scenario(positions, tuple(activated for _ in positions), tuple(depth for _ in positions))
    return float(ScenarioEval(bench, sc).scores(beta, k).ndcg.mean())


def _pick(scores: Mapping[str, float], current: str) -> str:
    """The best-scoring name; ties go to `current`, then to the first name in sorted order."""
    best = max(round(v, 12) for v in scores.values())
    tied = sorted(n for n, v in scores.items() if round(v, 12) == best)
    return current if current in tied else tied[0]


# ---------------------------------------------------------------- MMR gate
