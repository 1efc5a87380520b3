"""Maximal marginal relevance over fused candidates (DESIGN §5, paper eq. 11).

    d* = argmax_{d not in L} [ s(d) - lambda * max_{d' in L} cos(d, d') ]

s = the candidates' fusion scores min-max normalised to [0, 1] (all equal -> 1.0), lambda = 0.5,
cos = cosine of the passages' stored embeddings (divided by each row's norm, so vectors need not be
unit length; a zero vector has similarity 0 to everything). L starts empty, so the first pick is the
top fused candidate (its max-similarity is reported as 0.0). Ties are broken by passage id (ascending).

The gate (FusionConfig.mmr_gate): "always" runs MMR on every query of an MMR system, "off" never, and
"redundant" only when the fused top k is redundant — the mean pairwise cosine of its passages' vectors
(`redundancy`) reaches FusionConfig.mmr_redundancy (`mmr_applies`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from amsrag.errors import InputError
from amsrag.fuse.base import FusedItem, FusedList


@dataclass(frozen=True, slots=True)
class MMRPick:
    """One MMR selection: the item, its normalised fusion score s, max cosine to earlier picks, and s - lambda*sim."""

    item: FusedItem
    relevance: float
    max_sim: float
    mmr_score: float


MMRGateMode = Literal["always", "redundant", "off"]
MMR_GATES: tuple[MMRGateMode, ...] = ("always", "redundant", "off")


@dataclass(frozen=True, slots=True)
class MMRGate:
    """The gate's decision on one query: its mode, whether MMR ran, the top k's redundancy (None: not measured)."""

    mode: MMRGateMode
    applied: bool
    redundancy: float | None
    threshold: float

    def to_dict(self) -> dict[str, object]:
        return {"mode": self.mode, "applied": self.applied,
                "redundancy": None if self.redundancy is None else round(self.redundancy, 4),
                "threshold": self.threshold}


@dataclass(frozen=True, slots=True)
class MMRResult:
    """Picks in selection order (none when the gate kept MMR off: the fused top k is used as is)."""

    picks: list[MMRPick]
    lam: float
    gate: MMRGate | None = None

    @property
    def items(self) -> list[FusedItem]:
        return [p.item for p in self.picks]

    @property
    def ids(self) -> list[str]:
        return [p.item.id for p in self.picks]

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"lambda": self.lam}
        if self.gate is not None:
            out["gate"] = self.gate.to_dict()
            if not self.gate.applied:  # no "picks": readers of the trace show MMR as not applied
                return out
        out["picks"] = [{"id": p.item.id, "relevance": p.relevance, "max_sim": p.max_sim, "mmr_score": p.mmr_score}
                        for p in self.picks]
        return out


def minmax(scores: np.ndarray) -> np.ndarray:
    """(s - min) / (max - min); all equal (or a single score) -> 1.0 each."""
    s = np.asarray(scores, dtype=np.float64)
    if s.size == 0:
        return s.copy()
    lo, hi = float(s.min()), float(s.max())
    if hi == lo:
        return np.ones_like(s)
    return (s - lo) / (hi - lo)


def _inverse_norms(vectors: np.ndarray) -> np.ndarray:
    """1 / ||v|| per row, 0 for a zero row (so its cosine to anything is 0)."""
    sq = np.einsum("ij,ij->i", vectors, vectors, dtype=np.float64)
    return np.divide(1.0, np.sqrt(sq), out=np.zeros_like(sq), where=sq > 0)


def redundancy(vectors: np.ndarray) -> float:
    """Mean pairwise cosine of the rows of `vectors` (shape (n, dim)); 0.0 for fewer than two rows.

    A zero row has cosine 0 to everything, as in `mmr`."""
    v = np.asarray(vectors, dtype=np.float64)
    if v.ndim != 2:
        raise InputError(f"redundancy: vectors must have shape (n, dim), got {v.shape}")
    n = v.shape[0]
    if n < 2:
        return 0.0
    unit = v * _inverse_norms(v)[:, None]
    gram = unit @ unit.T
    return float((gram.sum() - np.trace(gram)) / (n * (n - 1)))


def mmr_applies(gate: str, redundancy: float | None, threshold: float) -> bool:
    """Whether MMR runs under `gate`: always, never (off), or when the top k's redundancy >= threshold."""
    if gate == "always":
        return True
    if gate == "off":
        return False
    if gate == "redundant":
        if redundancy is None:
            raise InputError("MMR gate 'redundant' needs the candidates' redundancy")
        return redundancy >= threshold
    raise InputError(f"unknown MMR gate {gate!r}; expected one of {', '.join(MMR_GATES)}")


def mmr(
    candidates: FusedList | Sequence[FusedItem],
    vectors: np.ndarray,
    k: int,
    lam: float = 0.5,
) -> MMRResult:
    """Select up to k candidates by eq. 11; `vectors[i]` is the embedding of `candidates[i]`, shape (n, dim).

    Returns min(k, n) picks in selection order (none for k = 0 or no candidates).
    """
    items = list(candidates.items if isinstance(candidates, FusedList) else candidates)
    n = len(items)
    if k < 0:
        raise InputError(f"MMR: k must be >= 0, got {k}")
    if not (np.isfinite(lam) and lam >= 0):
        raise InputError(f"MMR: lambda must be a finite number >= 0, got {lam!r}")
    vecs = np.asarray(vectors)
    if n and (vecs.ndim != 2 or vecs.shape[0] != n):
        raise InputError(f"MMR: vectors must have shape ({n}, dim) aligned with the candidates, got {vecs.shape}")
    take = min(k, n)
    if take == 0:
        return MMRResult(picks=[], lam=float(lam))

    rel = minmax(np.fromiter((it.score for it in items), dtype=np.float64, count=n))
    vecs = vecs.astype(np.float32, copy=False)
    inv = _inverse_norms(vecs)
    max_sim = np.full(n, -np.inf)  # max cosine to the picks so far (cosines may be negative)
    chosen = np.zeros(n, dtype=bool)
    picks: list[MMRPick] = []
    for step in range(take):
        score = rel - lam * max_sim if step else rel.copy()
        score[chosen] = -np.inf
        best = score.max()
        tied = np.flatnonzero(score == best)
        i = int(tied[0]) if tied.size == 1 else min((int(j) for j in tied), key=lambda j: items[j].id)
        picks.append(MMRPick(item=items[i], relevance=float(rel[i]), max_sim=float(max_sim[i]) if step else 0.0,
                             mmr_score=float(score[i])))
        chosen[i] = True
        if step + 1 < take:
            cos = (vecs @ vecs[i]) * inv * inv[i]  # cosine to the new pick
            np.maximum(max_sim, cos, out=max_sim)
    return MMRResult(picks=picks, lam=float(lam))
