"""The calibration questions replayed offline: each scenario (a query fused over a set of retrievers) scored
for given priors, the shared machinery of the prior, route and MMR fits."""


from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from amsrag.fuse.rank_fusion import rho
from amsrag.learn.router.calibration import FIT_K, CalibrationQuery, list_key
from amsrag.types import RETRIEVERS


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


