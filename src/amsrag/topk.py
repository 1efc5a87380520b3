"""Top-k selection with deterministic tie-breaking by passage id."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np


def topk_indices(scores: np.ndarray, k: int, key_of: Callable[[int], str], min_score: float | None = None) -> list[int]:
    """Indices of the k best scores, score descending then `key_of(index)` ascending.

    Every index tied with the k-th score is considered before the cut, so the result does not
    depend on argpartition's arbitrary order among ties.
    """
    n = scores.shape[0]
    if n == 0 or k <= 0:
        return []
    candidates = np.flatnonzero(scores > min_score) if min_score is not None else np.arange(n)
    if candidates.size == 0:
        return []
    cand_scores = scores[candidates]
    if candidates.size > k:
        kth = np.partition(cand_scores, candidates.size - k)[candidates.size - k]
        keep = cand_scores >= kth
        candidates, cand_scores = candidates[keep], cand_scores[keep]
    order = sorted(range(candidates.size), key=lambda i: (-float(cand_scores[i]), key_of(int(candidates[i]))))
    return [int(candidates[i]) for i in order[:k]]


def ids_key(ids: Sequence[str]) -> Callable[[int], str]:
    return ids.__getitem__
