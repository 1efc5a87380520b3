"""Confidence of a generated answer from its token log-probabilities."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any


def logprob_confidence(logprobs: Sequence[float]) -> float | None:
    """exp(mean token log-probability): the geometric-mean token probability of the answer, in [0, 1]."""
    values = [lp for lp in logprobs if lp is not None and math.isfinite(lp)]
    if not values:
        return None
    return float(math.exp(sum(values) / len(values)))


def mean_entropy(top_logprobs: Sequence[Sequence[float]]) -> float | None:
    """Mean entropy (nats) of the top-k token distributions (renormalised over the k shown)."""
    entropies = []
    for row in top_logprobs:
        ps = [math.exp(lp) for lp in row if lp is not None and math.isfinite(lp)]
        z = sum(ps)
        if z > 0:
            entropies.append(-sum(p / z * math.log(p / z) for p in ps if p > 0))
    return float(sum(entropies) / len(entropies)) if entropies else None


def token_logprobs(block: Any) -> tuple[list[float], list[list[float]]]:
    """Token logprobs and top-k logprobs of an OpenAI `logprobs` block (chat format, or completion format)."""
    if not isinstance(block, dict):
        return [], []
    content = block.get("content")
    if isinstance(content, list):
        lps = [float(t["logprob"]) for t in content if isinstance(t, dict) and t.get("logprob") is not None]
        tops = [[float(x["logprob"]) for x in t.get("top_logprobs") or [] if x.get("logprob") is not None]
                for t in content if isinstance(t, dict)]
        return lps, [t for t in tops if t]
    token_lps = block.get("token_logprobs")
    if isinstance(token_lps, list):
        tops = [list(d.values()) for d in block.get("top_logprobs") or [] if isinstance(d, dict)]
        return [float(x) for x in token_lps if x is not None], tops
    return [], []
