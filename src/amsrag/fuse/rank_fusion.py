"""Rank fusion of several retrievers' ranked lists (DESIGN §5, paper eqs. 7-10).

Conventions shared by every fuser here:

* Input: a mapping retriever name -> its ranked hits. Ranks are `Hit.rank` and count from 1 (the
  top hit has rank 1), so with k = 60 a top hit contributes 1/61. A passage listed twice by one
  retriever counts once, at its best rank.
* Retrievers are processed in sorted name order, so the output does not depend on the order of the
  mapping (scores are summed in the same order, bit for bit).
* Output: a `FusedList` sorted by score descending, ties broken by passage id (ascending).
  Each item keeps the retrievers' ranks and its per-retriever contributions (they sum to its score),
  and the first non-negative store `row` / first non-empty title seen.

Formulas:

* RRF(d)          = sum_r 1 / (k + rank_r(d))                       (k = 60)
* weighted RRF(d) = sum_r w_r / (k_r + rank_r(d))
* CombSUM(d)      = sum_r norm_r(d)         norm_r = per-list min-max normalised score
                                            (a list whose scores are all equal -> every item 1.0)
* CombMNZ(d)      = CombSUM(d) * |{r : d in list_r}|
* CA-RRF(d)       = sum_{r in RS*} w_r(c, alpha) / (k_r(c) + rank_r(d))                     (eq. 8)
  w_r(c, alpha)   = (1 - rho(alpha)) / |RS*| + rho(alpha) * beta_r^(c)                      (eq. 9)
  rho(alpha)      = sigmoid(kappa * (alpha - alpha0))                                       (eq. 10)
  RS* = the activated retrievers (the mapping's keys, including those that returned nothing);
  beta is renormalised over RS*.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from amsrag.config import FusionConfig
from amsrag.errors import InputError
from amsrag.fuse.base import FusedItem, FusedList, Fuser
from amsrag.types import COMPLEXITIES, Complexity, Hit

FUSION_METHODS: tuple[str, ...] = ("rrf", "weighted_rrf", "combsum", "combmnz", "ca_rrf")


# ---------------------------------------------------------------- shared machinery


def _best_hits(hits: Sequence[Hit], retriever: str) -> list[Hit]:
    """The hits of one list, one per passage id (its best rank), in rank order."""
    previous = 0
    in_order = True
    for h in hits:
        if not isinstance(h.rank, int | np.integer) or h.rank < 1:
            raise InputError(f"retriever {retriever!r}: hit {h.id!r} has rank {h.rank!r}; ranks count from 1")
        if h.rank <= previous:
            in_order = False
        previous = h.rank
    if in_order and len({h.id for h in hits}) == len(hits):
        return list(hits)  # the usual case: strictly increasing ranks, distinct ids
    best: dict[str, Hit] = {}
    for h in hits:
        cur = best.get(h.id)
        if cur is None or h.rank < cur.rank:
            best[h.id] = h
    return sorted(best.values(), key=lambda h: (h.rank, h.id))


def _assemble(
    method: str,
    lists: Mapping[str, Sequence[Hit]],
    contribution: Mapping[str, Sequence[float]],
    deduped: Mapping[str, list[Hit]],
    weights: dict[str, float],
    k: dict[str, float],
    params: dict[str, Any] | None = None,
    multiply_by_count: bool = False,
) -> FusedList:
    """Build the FusedList from each retriever's per-hit contributions (aligned with `deduped[r]`)."""
    acc: dict[str, list[Any]] = {}  # id -> [row, title, ranks, contributions]
    for r in sorted(lists):
        for h, c in zip(deduped[r], contribution[r], strict=True):
            a = acc.get(h.id)
            if a is None:
                acc[h.id] = [h.row, h.title, {r: int(h.rank)}, {r: c}]
                continue
            if a[0] < 0 <= h.row:
                a[0] = h.row
            if not a[1] and h.title:
                a[1] = h.title
            a[2][r] = int(h.rank)
            a[3][r] = c
    items: list[FusedItem] = []
    for pid, (row, title, ranks, per_r) in acc.items():
        if multiply_by_count:
            n = len(per_r)
            per_r = {r: v * n for r, v in per_r.items()}
        # per_r is in sorted retriever order, so the sum is the same whatever the mapping's order
        items.append(FusedItem(id=pid, row=row, score=sum(per_r.values()), title=title, ranks=ranks,
                               contributions=per_r))
    items.sort(key=_order_key)
    return FusedList(method=method, items=items, weights=weights, k=k, params=dict(params or {}))


def _order_key(item: FusedItem) -> tuple[float, str]:
    return (-item.score, item.id)


def _check_non_negative(name: str, values: Mapping[str, float]) -> None:
    for r, v in values.items():
        if not (math.isfinite(v) and v >= 0):
            raise InputError(f"{name} for retriever {r!r} must be a finite number >= 0, got {v!r}")


def rank_fuse(
    lists: Mapping[str, Sequence[Hit]],
    weights: Mapping[str, float],
    k: Mapping[str, float],
    method: str = "weighted_rrf",
    params: dict[str, Any] | None = None,
) -> FusedList:
    """sum_r w_r / (k_r + rank_r(d)) over the retrievers listing d; ranks count from 1.

    Every retriever of `lists` needs a weight and a k (InputError otherwise). A passage listed only
    by zero-weighted retrievers stays in the output with score 0.
    """
    missing = sorted((set(lists) - set(weights)) | (set(lists) - set(k)))
    if missing:
        raise InputError(f"{method}: no weight or k for retriever(s) {missing}")
    w = {r: float(weights[r]) for r in sorted(lists)}
    ks = {r: float(k[r]) for r in sorted(lists)}
    _check_non_negative("weight", w)
    _check_non_negative("k", ks)
    deduped = {r: _best_hits(lists[r], r) for r in lists}
    contribution = {r: [w[r] / (ks[r] + h.rank) for h in deduped[r]] for r in lists}
    return _assemble(method, lists, contribution, deduped, w, ks, params)


def _minmax(hits: Sequence[Hit], retriever: str) -> list[float]:
    """Min-max normalised scores of one list; all equal -> 1.0 each."""
    scores = [float(h.score) for h in hits]
    if not all(math.isfinite(s) for s in scores):
        raise InputError(f"retriever {retriever!r}: non-finite score, cannot min-max normalise")
    if not scores:
        return []
    lo, hi = min(scores), max(scores)
    if hi == lo:
        return [1.0] * len(scores)
    span = hi - lo
    return [(s - lo) / span for s in scores]


def comb_fuse(lists: Mapping[str, Sequence[Hit]], mnz: bool) -> FusedList:
    """CombSUM (sum of per-list min-max normalised scores) or CombMNZ (that sum x number of lists with d).

    For CombMNZ an item's contributions are its normalised scores times that count, so they still
    sum to its score.
    """
    deduped = {r: _best_hits(lists[r], r) for r in lists}
    contribution = {r: _minmax(deduped[r], r) for r in lists}
    names = sorted(lists)
    return _assemble("combmnz" if mnz else "combsum", lists, contribution, deduped,
                     {r: 1.0 for r in names}, {}, multiply_by_count=mnz)


# ---------------------------------------------------------------- CA-RRF weights (eqs. 9-10)


def rho(alpha: float, kappa: float = 2.0, alpha0: float = 0.5) -> float:
    """rho(alpha) = sigmoid(kappa * (alpha - alpha0)) (eq. 10), computed without overflow."""
    x = kappa * (alpha - alpha0)
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


def _check_class(c: str) -> Complexity:
    if c not in COMPLEXITIES:
        raise InputError(f"unknown complexity class {c!r}; expected one of {', '.join(COMPLEXITIES)}")
    return c


def _check_alpha(alpha: float) -> float:
    a = float(alpha)
    if not (0.0 <= a <= 1.0):
        raise InputError(f"confidence alpha must lie in [0, 1], got {alpha!r}")
    return a


def ca_rrf_weights(
    c: str,
    alpha: float,
    activated: Sequence[str],
    beta_by_class: Mapping[str, Mapping[str, float]],
    kappa: float = 2.0,
    alpha0: float = 0.5,
) -> dict[str, float]:
    """w_r(c, alpha) = (1 - rho(alpha)) / |RS*| + rho(alpha) * beta_r^(c)   (eq. 9), rho per eq. 10.

    beta^(c) is renormalised over the activated retrievers RS*: a retriever without a prior counts
    as 0; if every prior is 0 (or class c has none) beta is uniform. The weights are >= 0 and sum to 1
    (empty dict when nothing is activated).
    """
    _check_class(c)
    a = _check_alpha(alpha)
    names = sorted(set(activated))
    if not names:
        return {}
    prior = beta_by_class.get(c, {})
    raw = {r: float(prior.get(r, 0.0)) for r in names}
    _check_non_negative(f"beta[{c}]", raw)
    total = sum(raw.values())
    beta = {r: v / total for r, v in raw.items()} if total > 0 else {r: 1.0 / len(names) for r in names}
    p = rho(a, kappa, alpha0)
    uniform = (1.0 - p) / len(names)
    return {r: uniform + p * beta[r] for r in names}


# ---------------------------------------------------------------- fusers


class RRF:
    """RRF(d) = sum_r 1 / (k + rank_r(d)), ranks counted from 1, k = 60 (a top hit adds 1/61)."""

    method = "rrf"

    def __init__(self, k: float = 60.0) -> None:
        self.k = float(k)

    def fuse(self, lists: Mapping[str, Sequence[Hit]]) -> FusedList:
        return rank_fuse(lists, {r: 1.0 for r in lists}, {r: self.k for r in lists}, method=self.method)


class WeightedRRF:
    """Weighted RRF(d) = sum_r w_r / (k_r + rank_r(d)), ranks from 1; k is one number or per retriever."""

    method = "weighted_rrf"

    def __init__(self, weights: Mapping[str, float], k: float | Mapping[str, float] = 60.0) -> None:
        self.weights = dict(weights)
        self.k = k if isinstance(k, Mapping) else float(k)

    def fuse(self, lists: Mapping[str, Sequence[Hit]]) -> FusedList:
        ks = self.k if isinstance(self.k, Mapping) else {r: self.k for r in lists}
        return rank_fuse(lists, self.weights, ks, method=self.method)


class CombSUM:
    """CombSUM(d) = sum_r norm_r(d), per-list min-max normalised scores (all-equal list -> 1.0)."""

    method = "combsum"

    def fuse(self, lists: Mapping[str, Sequence[Hit]]) -> FusedList:
        return comb_fuse(lists, mnz=False)


class CombMNZ:
    """CombMNZ(d) = CombSUM(d) x (number of lists containing d)."""

    method = "combmnz"

    def fuse(self, lists: Mapping[str, Sequence[Hit]]) -> FusedList:
        return comb_fuse(lists, mnz=True)


class CARRF:
    """Confidence-aware RRF (eqs. 8-10) for complexity class c predicted with confidence alpha.

    CA-RRF(d) = sum_{r in RS*} w_r(c, alpha) / (k_r(c) + rank_r(d)), ranks from 1, with
    w_r from `ca_rrf_weights` and RS* = the keys of the mapping given to `fuse`. k_r(c) and beta^(c)
    come from `config` (k_by_class / beta_by_class, a retriever without k_r(c) gets rrf_k); `k` and
    `beta` override them for this class.
    """

    method = "ca_rrf"

    def __init__(
        self,
        c: str,
        alpha: float,
        config: FusionConfig | None = None,
        *,
        k: Mapping[str, float] | None = None,
        beta: Mapping[str, float] | None = None,
    ) -> None:
        self.c = _check_class(c)
        self.alpha = _check_alpha(alpha)
        self.config = config or FusionConfig()
        self.k_r = dict(k) if k is not None else dict(self.config.k_by_class.get(self.c, {}))
        self.beta = dict(beta) if beta is not None else dict(self.config.beta_by_class.get(self.c, {}))

    def weights(self, activated: Sequence[str]) -> dict[str, float]:
        return ca_rrf_weights(self.c, self.alpha, activated, {self.c: self.beta},
                              kappa=self.config.kappa, alpha0=self.config.alpha0)

    def fuse(self, lists: Mapping[str, Sequence[Hit]]) -> FusedList:
        w = self.weights(list(lists))
        ks = {r: float(self.k_r.get(r, self.config.rrf_k)) for r in sorted(lists)}
        params = {"complexity": self.c, "alpha": self.alpha, "kappa": self.config.kappa,
                  "alpha0": self.config.alpha0, "rho": rho(self.alpha, self.config.kappa, self.config.alpha0)}
        return rank_fuse(lists, w, ks, method=self.method, params=params)


def make_fuser(
    method: str,
    config: FusionConfig | None = None,
    *,
    weights: Mapping[str, float] | None = None,
    complexity: str | None = None,
    alpha: float | None = None,
) -> Fuser:
    """A fuser by name: rrf, weighted_rrf (needs weights), combsum, combmnz, ca_rrf (needs complexity, alpha).

    Names are case-insensitive and "-" is read as "_" ("ca-rrf" works).
    """
    cfg = config or FusionConfig()
    method = method.lower().replace("-", "_")
    if method == "rrf":
        return RRF(cfg.rrf_k)
    if method == "weighted_rrf":
        if weights is None:
            raise InputError("weighted_rrf needs a weight per retriever")
        return WeightedRRF(weights, cfg.rrf_k)
    if method == "combsum":
        return CombSUM()
    if method == "combmnz":
        return CombMNZ()
    if method == "ca_rrf":
        if complexity is None or alpha is None:
            raise InputError("ca_rrf needs the complexity class and the classifier's confidence alpha")
        return CARRF(complexity, alpha, cfg)
    raise InputError(f"unknown fusion method {method!r}; expected one of {', '.join(FUSION_METHODS)}")
