"""`amsrag route tune`: thresholds, per-class routes, CA-RRF priors and the MMR gate from calibration queries.

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
import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np

from amsrag.config import AmsragConfig, FusionConfig, RouterConfig
from amsrag.errors import InputError
from amsrag.fuse import FusedItem, mmr, redundancy
from amsrag.fuse.rank_fusion import rho
from amsrag.route.router import Router, retrieval_class
from amsrag.types import COMPLEXITIES, RETRIEVERS, Complexity, QAExample

# The paper's coarse grid and a finer one around it.
COARSE_HIGH = (0.80, 0.85, 0.90, 0.92, 0.95)
COARSE_LOW = (0.50, 0.55, 0.60, 0.62, 0.65)
FINE = tuple(round(x, 2) for x in np.arange(0.40, 0.991, 0.01))
K_GRID = (10.0, 20.0, 40.0, 60.0, 80.0, 120.0)  # candidate k_r(c)
BETA_STEP = 0.1
FIT_K = 5  # the fits maximise nDCG@5: the passages a query hands on
MAX_DEPTH = 100
LAMBDA_GRID = tuple(round(x, 2) for x in np.arange(0.1, 1.001, 0.1))
REDUNDANCY_GRID = tuple(round(x, 2) for x in np.arange(0.0, 0.991, 0.02))
MIN_GATE_SUPPORT = 10  # calibration queries a "redundant" threshold must send through MMR
SEEDED = "graph"  # the retriever walking from the others' hits (RetrievalPass.retrieve)
SEEDERS = ("bm25", "dense")


@dataclass(frozen=True, slots=True)
class RankedList:
    """One retriever's ranking of a query: passage ids and store rows, rank = position + 1."""

    ids: tuple[str, ...]
    rows: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class CalibrationQuery:
    true_class: str
    predicted: Complexity
    alpha: float
    ndcg: Mapping[str, float] = field(default_factory=dict)  # per retriever, nDCG@10 of the gold (empty: no gold)
    gold: tuple[str, ...] = ()
    # per retriever (list_key: the seeded retriever per set of co-activated seeders), at the routes' depth
    lists: Mapping[str, RankedList] = field(default_factory=dict)


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


def ndcg10(ranked: Sequence[str], gold: Sequence[str]) -> float:
    g = set(gold)
    dcg = sum(1 / math.log2(i + 2) for i, pid in enumerate(ranked[:10]) if pid in g)
    return dcg / sum(1 / math.log2(i + 2) for i in range(min(len(g), 10)))


# ---------------------------------------------------------------- the calibration pass


def list_key(retriever: str, activated: Iterable[str]) -> str:
    """Which stored list a retriever contributes when `activated` run together: the seeded retriever walks
    from the other activated seeders' hits ("graph<dense"), or from all its seeders when alone or with all."""
    if retriever != SEEDED:
        return retriever
    others = sorted(set(activated) & set(SEEDERS))
    if not others or len(others) == len(SEEDERS):
        return retriever
    return f"{retriever}<{'+'.join(others)}"


def calibration_depth(router: RouterConfig) -> int:
    return min(MAX_DEPTH, max(router.depth.values()))


def _ranked(hits: Sequence[Any]) -> RankedList:
    return RankedList(tuple(h.id for h in hits), tuple(int(h.row) for h in hits))


def retriever_lists(engine: Any, question: str, vector: np.ndarray, depth: int) -> dict[str, RankedList]:
    """Each retriever's ranking at `depth`; the seeded retriever also seeded from each seeder alone."""
    hits: dict[str, list[Any]] = {r: engine.index.retriever(r).search(question, k=depth, query_vector=vector)
                                  for r in RETRIEVERS if r != SEEDED}
    out: dict[str, RankedList] = {r: _ranked(h) for r, h in hits.items()}
    if SEEDED in RETRIEVERS:
        seeded = engine.index.retriever(SEEDED)
        out[SEEDED] = _ranked(seeded.search(question, k=depth, query_vector=vector))
        if hasattr(seeded, "search_seeded"):
            for s in SEEDERS:
                out[list_key(SEEDED, (s,))] = _ranked(seeded.search_seeded(question, depth, [hits[s]]))
    return out


def calibration_queries(engine: Any, questions: Sequence[QAExample],
                        progress: Callable[[int], None] | None = None) -> list[CalibrationQuery]:
    """Classify every question and, where its gold passages are indexed, keep each retriever's ranking."""
    depth = calibration_depth(engine.config.router)
    out = []
    for q in questions:
        if q.complexity not in COMPLEXITIES:
            continue
        vec = engine.index.encoder.encode_query(q.question)
        pred = engine.classifier.predict(q.question, query_vector=vec)
        ndcg: dict[str, float] = {}
        lists: dict[str, RankedList] = {}
        gold: tuple[str, ...] = ()
        if q.gold_passage_ids and len(engine.index.rows_for_ids(q.gold_passage_ids)) == len(q.gold_passage_ids):
            gold = tuple(sorted(set(q.gold_passage_ids)))
            lists = retriever_lists(engine, q.question, vec, depth)
            ndcg = {r: ndcg10(lists[r].ids, gold) for r in RETRIEVERS}
        label, alpha = retrieval_class(pred.label, pred.probs, pred.alpha, engine.generator_knows)
        out.append(CalibrationQuery(q.complexity, label, alpha, ndcg, gold, lists))
        if progress is not None:
            progress(1)
    return out


# ---------------------------------------------------------------- offline CA-RRF


@dataclass(frozen=True, slots=True)
class Scenario:
    """Queries fused alike: per query, the activated retrievers and the depth of their lists."""

    positions: tuple[int, ...]  # into the Bench's queries
    activated: tuple[tuple[str, ...], ...]
    depth: tuple[int, ...]


class Bench:
    """Per-query rank arrays over each query's candidates (sorted by id, so argmax's first index breaks ties
    by id as FusedList does), for vectorised CA-RRF nDCG@5 / all-gold@5."""

    def __init__(self, queries: Sequence[CalibrationQuery], kappa: float, alpha0: float) -> None:
        self.queries = list(queries)
        self.rho = np.array([rho(q.alpha, kappa, alpha0) for q in queries])
        self.universe: list[list[str]] = []
        self.ranks: list[dict[str, np.ndarray]] = []
        self.gold: list[np.ndarray] = []
        for q in queries:
            ids = sorted({pid for lst in q.lists.values() for pid in lst.ids} | set(q.gold))
            where = {pid: i for i, pid in enumerate(ids)}
            per: dict[str, np.ndarray] = {}
            for key, lst in q.lists.items():
                r = np.full(len(ids), np.inf)
                for rank, pid in enumerate(lst.ids, start=1):
                    j = where[pid]
                    r[j] = min(r[j], rank)
                per[key] = r
            gold = set(q.gold)
            self.universe.append(ids)
            self.ranks.append(per)
            self.gold.append(np.array([pid in gold for pid in ids], dtype=bool))

    def tensors(self, sc: Scenario) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(ranks [Q, R, U] with inf where absent or deeper than the route's depth, active [Q, R], gold [Q, U],
        idcg@5 [Q], n_gold [Q]) over RETRIEVERS."""
        n_u = max((len(self.universe[p]) for p in sc.positions), default=0)
        ranks = np.full((len(sc.positions), len(RETRIEVERS), n_u), np.inf)
        active = np.zeros((len(sc.positions), len(RETRIEVERS)), dtype=bool)
        gold = np.zeros((len(sc.positions), n_u), dtype=bool)
        n_gold = np.zeros(len(sc.positions))
        for i, (p, act, depth) in enumerate(zip(sc.positions, sc.activated, sc.depth, strict=True)):
            u = len(self.universe[p])
            gold[i, :u] = self.gold[p]
            n_gold[i] = self.gold[p].sum()
            for j, r in enumerate(RETRIEVERS):
                if r in act:
                    active[i, j] = True
                    rk = self.ranks[p].get(list_key(r, act))
                    if rk is not None:
                        ranks[i, j, :u] = np.where(rk <= depth, rk, np.inf)
        disc = 1.0 / np.log2(np.arange(2, FIT_K + 2))
        idcg = np.array([disc[: int(min(g, FIT_K))].sum() for g in n_gold])
        return ranks, active, gold, idcg, n_gold


@dataclass(frozen=True, slots=True)
class Scores:
    """Per-query nDCG@5 and all-gold@5 (NaN: fewer than two gold) of one fusion setting."""

    ndcg: np.ndarray
    all_gold: np.ndarray


class ScenarioEval:
    """CA-RRF nDCG@5 of one scenario for many (beta, k) settings; tensors built once."""

    def __init__(self, bench: Bench, sc: Scenario) -> None:
        self.ranks, self.active, self.gold, self.idcg, self.n_gold = bench.tensors(sc)
        self.rho = bench.rho[list(sc.positions)]
        self.present = np.isfinite(self.ranks) & self.active[:, :, None]
        self.listed = self.present.any(axis=1)  # candidates some activated list holds
        self.n_active = np.maximum(self.active.sum(axis=1), 1)
        self._cache: dict[tuple[int, float], np.ndarray] = {}

    def __len__(self) -> int:
        return len(self.rho)

    def weights(self, betas: np.ndarray) -> np.ndarray:
        """w_r(c, alpha) [B, Q, R] (eq. 9), beta renormalised over each query's activated retrievers."""
        b = betas[:, None, :] * self.active[None]
        total = b.sum(axis=2, keepdims=True)
        uniform = self.active[None] / self.n_active[None, :, None]
        b = np.divide(b, total, out=np.broadcast_to(uniform, b.shape).copy(), where=total > 0)
        return ((1 - self.rho)[None, :, None] * uniform) + self.rho[None, :, None] * b

    def scores(self, betas: np.ndarray, k: Sequence[float]) -> Scores:
        """Per (beta, query) nDCG@5 [B, Q] and all-gold@5 [B, Q] for k_r = k (in RETRIEVERS order)."""
        w = self.weights(np.asarray(betas, dtype=np.float64))
        fused = np.zeros((w.shape[0], *self.listed.shape))
        for j, kr in enumerate(k):  # summed in retriever order, as rank_fuse does
            fused += w[:, :, j, None] * self._inverse(j, float(kr))[None]
        fused[:, ~self.listed] = -1.0
        return self._metrics(fused)

    def _inverse(self, j: int, k: float) -> np.ndarray:
        """1 / (k + rank) of retriever j's lists [Q, U] (0 where absent), cached per (j, k)."""
        key = (j, k)
        if key not in self._cache:
            ranks = self.ranks[:, j]
            self._cache[key] = np.divide(1.0, k + ranks, out=np.zeros_like(ranks), where=self.present[:, j])
        return self._cache[key]

    def _metrics(self, fused: np.ndarray) -> Scores:
        disc = 1.0 / np.log2(np.arange(2, FIT_K + 2))
        dcg = np.zeros(fused.shape[:2])
        found = np.zeros(fused.shape[:2])
        gold = np.broadcast_to(self.gold[None], fused.shape)
        work = fused.copy()
        for i in range(min(FIT_K, fused.shape[2])):
            top = work.argmax(axis=2)[..., None]
            hit = np.take_along_axis(gold, top, axis=2)[..., 0] & (np.take_along_axis(work, top, axis=2)[..., 0] > -1)
            dcg += hit * disc[i]
            found += hit
            np.put_along_axis(work, top, -np.inf, axis=2)
        ndcg = np.divide(dcg, self.idcg[None], out=np.zeros_like(dcg), where=self.idcg[None] > 0)
        all_gold = np.where(self.n_gold[None] >= 2, (found >= self.n_gold[None]).astype(float), np.nan)
        return Scores(ndcg, all_gold)


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


@dataclass(frozen=True, slots=True)
class MMRFit:
    gate: str
    threshold: float
    lam: float
    queries: int
    without: dict[str, float]  # nDCG@5, all-gold@5, mean redundancy of the top 5 without MMR
    always: dict[str, float]  # with MMR on every query (the chosen lambda)
    chosen: dict[str, float]  # with the chosen gate
    by_class: dict[str, dict[str, float]]  # per predicted class: nDCG@5 without / always MMR


@dataclass(frozen=True, slots=True)
class PoolOutcome:
    """One query's fused top 5 without MMR and with MMR at each lambda of LAMBDA_GRID."""

    predicted: str
    redundancy: float
    plain: tuple[float, float, float]  # nDCG@5, all-gold@5 (NaN), redundancy of the returned five
    with_mmr: tuple[tuple[float, float, float], ...]


def _outcome(ids: Sequence[str], vecs: np.ndarray, gold: set[str]) -> tuple[float, float, float]:
    disc = 1.0 / np.log2(np.arange(2, FIT_K + 2))
    dcg = sum(disc[i] for i, pid in enumerate(ids[:FIT_K]) if pid in gold)
    idcg = disc[: min(len(gold), FIT_K)].sum()
    all_gold = float(gold <= set(ids[:FIT_K])) if len(gold) >= 2 else math.nan
    return float(dcg / idcg), all_gold, redundancy(vecs)


def pool_outcomes(bench: Bench, router: RouterConfig, fusion: FusionConfig, generator_knows: bool,
                  vectors_for_rows: Callable[[Sequence[int]], np.ndarray]) -> list[PoolOutcome]:
    """Each query's routed CA-RRF list (the tuned routes and priors), cut to the MMR pool, with and without MMR."""
    r = Router(router)
    out = []
    for q in bench.queries:
        if not (q.gold and q.lists):
            continue
        plan = r.route(q.predicted, q.alpha, generator_knows)
        if not plan.retrievers:
            continue
        fused = _fuse_query(q, plan.retrievers, plan.depth, fusion)
        pool = fused[: fusion.mmr_pool * FIT_K]
        if len(pool) <= 1:
            continue
        vecs = np.asarray(vectors_for_rows([it.row for it in pool]))
        gold = set(q.gold)
        plain = _outcome([it.id for it in pool], vecs[:FIT_K], gold)
        at = {it.id: i for i, it in enumerate(pool)}
        with_mmr = []
        for lam in LAMBDA_GRID:
            ids = mmr(pool, vecs, FIT_K, lam=lam).ids
            with_mmr.append(_outcome(ids, vecs[[at[i] for i in ids]], gold))
        out.append(PoolOutcome(q.predicted, plain[2], plain, tuple(with_mmr)))
    return out


def _fuse_query(q: CalibrationQuery, activated: Sequence[str], depth: int, fusion: FusionConfig) -> list[FusedItem]:
    """CA-RRF of one calibration query as the pipeline fuses it (via the fuser itself)."""
    from amsrag.fuse import CARRF
    from amsrag.types import Hit

    lists = {}
    for r in activated:
        lst = q.lists.get(list_key(r, activated), RankedList((), ()))
        lists[r] = [Hit(id=pid, score=0.0, rank=i + 1, title="", retriever=r, row=row)
                    for i, (pid, row) in enumerate(zip(lst.ids[:depth], lst.rows[:depth], strict=True))]
    return CARRF(q.predicted, q.alpha, fusion).fuse(lists).items


def fit_mmr(outcomes: Sequence[PoolOutcome], default_lambda: float = 0.5,
            min_support: int = MIN_GATE_SUPPORT) -> MMRFit:
    """The gate, threshold and lambda maximising mean nDCG@5 (then all-gold@5); ties: fewer MMR runs, then
    lambda nearer the default. A "redundant" threshold must let MMR run on at least `min_support` queries."""
    if not outcomes:
        return MMRFit("always", 0.5, default_lambda, 0, {}, {}, {}, {})
    plain = np.array([o.plain for o in outcomes])  # [Q, 3]
    mm = np.array([o.with_mmr for o in outcomes])  # [Q, L, 3]
    red = np.array([o.redundancy for o in outcomes])
    candidates: list[tuple[tuple[float, float, float, float], str, float, float]] = []
    for li, lam in enumerate(LAMBDA_GRID):
        near = -abs(lam - default_lambda)
        for gate, thr in [("off", 0.5), ("always", -1.0)] + [("redundant", t) for t in REDUNDANCY_GRID]:
            mask = _gate_mask(gate, thr, red)
            if gate == "redundant" and mask.sum() < min_support:
                continue  # a threshold that fires on a handful of queries only fits their noise
            chosen = np.where(mask[:, None], mm[:, li], plain)
            key = (round(float(chosen[:, 0].mean()), 12), round(float(np.nanmean(chosen[:, 1])), 12)
                   if np.isfinite(chosen[:, 1]).any() else 0.0, -float(mask.sum()), near)
            candidates.append((key, gate, thr, lam))
    _, gate, thr, lam = max(candidates, key=lambda c: c[0])
    if gate == "off":
        lam = default_lambda  # lambda does not matter when MMR never runs
    li = LAMBDA_GRID.index(lam) if lam in LAMBDA_GRID else int(np.argmin([abs(x - lam) for x in LAMBDA_GRID]))
    mask = _gate_mask(gate, thr, red)
    by_class: dict[str, dict[str, float]] = {}
    for c in COMPLEXITIES:
        sel = np.array([o.predicted == c for o in outcomes])
        if sel.any():
            by_class[c] = {"queries": float(sel.sum()), "ndcg@5_without": _r(plain[sel, 0].mean()),
                           "ndcg@5_always": _r(mm[sel, li, 0].mean())}
    return MMRFit(gate, -1.0 if gate == "always" else thr, lam, len(outcomes), _summary(plain, np.zeros_like(mask)),
                  _summary(np.where(np.ones_like(mask)[:, None], mm[:, li], plain), np.ones_like(mask)),
                  _summary(np.where(mask[:, None], mm[:, li], plain), mask), by_class)


def _gate_mask(gate: str, threshold: float, red: np.ndarray) -> np.ndarray:
    if gate == "off":
        return np.zeros(red.shape, dtype=bool)
    if gate == "always":
        return np.ones(red.shape, dtype=bool)
    return red >= threshold


def _r(x: float) -> float:
    return round(float(x), 4) if np.isfinite(x) else math.nan


def _summary(values: np.ndarray, mask: np.ndarray) -> dict[str, float]:
    ag = values[:, 1]
    return {"ndcg@5": _r(values[:, 0].mean()), "all_gold@5": _r(np.nanmean(ag)) if np.isfinite(ag).any() else 0.0,
            "redundancy": _r(values[:, 2].mean()), "mmr_share": _r(mask.mean())}


# ---------------------------------------------------------------- the whole tuning pass


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
