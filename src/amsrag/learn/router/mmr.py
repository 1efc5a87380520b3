"""The MMR gate (always / redundant / off), its redundancy threshold and lambda from the calibration
questions' routed CA-RRF lists."""


from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from amsrag.config import FusionConfig, RouterConfig
from amsrag.fuse import FusedItem, mmr, redundancy
from amsrag.learn.router.bench import Bench
from amsrag.learn.router.calibration import FIT_K, CalibrationQuery, RankedList, list_key
from amsrag.route.router import Router
from amsrag.types import COMPLEXITIES

LAMBDA_GRID = tuple(round(x, 2) for x in np.arange(0.1, 1.001, 0.1))
REDUNDANCY_GRID = tuple(round(x, 2) for x in np.arange(0.0, 0.991, 0.02))
MIN_GATE_SUPPORT = 10  # calibration queries a "redundant" threshold must send through MMR


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
