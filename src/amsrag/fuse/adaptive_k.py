"""Adaptive k: how many fused candidates to keep (DESIGN §5).

Rule, on scores sorted descending s_1 >= ... >= s_n (top = s_1, bottom = s_n):

    keep d_i while  s_i >= top - drop * (top - bottom)

i.e. cut where the min-max normalised score (s - bottom) / (top - bottom) falls more than `drop`
below the top's 1.0. All scores equal -> all kept. The count is then clamped: never fewer than
`min_k` (or all n when n < min_k), never more than `max_k`. drop = 0 keeps only the items tied
with the top (then the floor applies); drop = 1 keeps everything up to max_k.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from amsrag.errors import InputError
from amsrag.fuse.base import FusedList


def adaptive_k(scores: Sequence[float] | np.ndarray, drop: float = 0.5, min_k: int = 3, max_k: int = 10) -> int:
    """The number of leading candidates to keep (see the module docstring)."""
    s = np.asarray(scores, dtype=np.float64)
    if not (0.0 <= drop <= 1.0):
        raise InputError(f"adaptive k: drop must lie in [0, 1], got {drop!r}")
    if min_k < 0 or max_k < 0 or min_k > max_k:
        raise InputError(f"adaptive k: need 0 <= min_k <= max_k, got min_k={min_k}, max_k={max_k}")
    n = s.size
    if n == 0:
        return 0
    if not np.all(np.isfinite(s)):
        raise InputError("adaptive k: scores must be finite")
    if n > 1 and np.any(np.diff(s) > 0):
        raise InputError("adaptive k: scores must be sorted in descending order")
    top, bottom = float(s[0]), float(s[-1])
    threshold = top - drop * (top - bottom)
    slack = 1e-12 * max(abs(top), abs(bottom), 1e-300)  # a score on the threshold is kept despite rounding
    kept = int(np.count_nonzero(s >= threshold - slack))  # a prefix, since s is sorted
    return min(max(kept, min(min_k, n)), max_k)


def adaptive_cut(fused: FusedList, drop: float = 0.5, min_k: int = 3, max_k: int = 10) -> FusedList:
    """`fused` cut to its first `adaptive_k(fused.scores, ...)` items; the cut is recorded in params."""
    n = adaptive_k(fused.scores, drop=drop, min_k=min_k, max_k=max_k)
    params = {**fused.params, "adaptive_k": n, "adaptive_k_drop": drop, "adaptive_k_min": min_k,
              "adaptive_k_max": max_k, "candidates": len(fused)}
    return replace(fused, items=fused.top(n), params=params)
