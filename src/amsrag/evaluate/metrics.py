"""Answer and retrieval metrics of one query (DESIGN §7).

EM / F1 are `amsrag.generate.metrics` (the SQuAD v1.1 script's, which the readers use at run time too).
Retrieval metrics use binary relevance of the gold passages; the ideal DCG of nDCG@k runs over
min(|gold|, k) relevant passages.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from amsrag.generate.metrics import exact_match, f1_score, normalize_answer


def _top(ranked: Sequence[str], k: int) -> list[str]:
    return list(dict.fromkeys(ranked))[:k]  # a passage counts once, at its best rank


def ndcg_at(ranked: Sequence[str], gold: Sequence[str], k: int = 5) -> float:
    g = set(gold)
    if not g:
        raise ValueError("nDCG needs at least one gold passage")
    dcg = sum(1.0 / math.log2(i + 2) for i, pid in enumerate(_top(ranked, k)) if pid in g)
    idcg = sum(1.0 / math.log2(i + 2) for i in range(min(len(g), k)))
    return dcg / idcg


def recall_at(ranked: Sequence[str], gold: Sequence[str], k: int = 5) -> float:
    g = set(gold)
    if not g:
        raise ValueError("recall needs at least one gold passage")
    return len(set(_top(ranked, k)) & g) / len(g)


def all_gold_at(ranked: Sequence[str], gold: Sequence[str], k: int = 5) -> float:
    """1.0 when every gold passage is in the top k (the multi-hop evidence is complete)."""
    g = set(gold)
    if not g:
        raise ValueError("all-gold needs at least one gold passage")
    return float(g <= set(_top(ranked, k)))


def mrr_at(ranked: Sequence[str], gold: Sequence[str], k: int = 10) -> float:
    g = set(gold)
    if not g:
        raise ValueError("MRR needs at least one gold passage")
    return next((1.0 / (i + 1) for i, pid in enumerate(_top(ranked, k)) if pid in g), 0.0)


RETRIEVAL_METRICS = ("ndcg@5", "recall@5", "all_gold@5", "mrr@10")
ANSWER_METRICS = ("em", "f1")
METRICS = (*ANSWER_METRICS, *RETRIEVAL_METRICS)
__all__ = ["ANSWER_METRICS", "METRICS", "RETRIEVAL_METRICS", "WRONG_F1", "all_gold_at", "exact_match", "f1_score",
           "flag_quality", "mrr_at", "ndcg_at", "normalize_answer", "query_metrics", "recall_at"]


def query_metrics(answer: str | None, answers: Sequence[str], ranked: Sequence[str], gold: Sequence[str],
                  multi_hop: bool) -> dict[str, float]:
    """Every metric of one query; NaN where it does not apply (no gold: no retrieval metrics; all-gold@5
    only for multi-hop questions; no answer produced or no gold answers: no EM/F1)."""
    nan = float("nan")
    out = {m: nan for m in METRICS}
    if answer is not None and answers:
        out["em"], out["f1"] = exact_match(answer, answers), f1_score(answer, answers)
    if gold:
        out["ndcg@5"] = ndcg_at(ranked, gold, 5)
        out["recall@5"] = recall_at(ranked, gold, 5)
        out["mrr@10"] = mrr_at(ranked, gold, 10)
        if multi_hop:
            out["all_gold@5"] = all_gold_at(ranked, gold, 5)
    return out


WRONG_F1 = 0.5  # an answer given with token F1 below this against every gold alias is wrong


def flag_quality(flagged: Sequence[bool], target: Sequence[bool]) -> dict[str, float | int | None]:
    """How well a flag finds `target` answers (e.g. the wrong ones): the flag rate over all answers, its
    precision (flagged and target / flagged) and its recall of the target (flagged and target / target);
    None where the denominator is empty."""
    if len(flagged) != len(target):
        raise ValueError(f"{len(flagged)} flags for {len(target)} answers")
    pairs = list(zip(flagged, target, strict=True))
    n, n_flagged, n_target = len(pairs), sum(bool(f) for f, _ in pairs), sum(bool(t) for _, t in pairs)
    hits = sum(bool(f) and bool(t) for f, t in pairs)
    return {"n": n, "flagged": n_flagged, "target": n_target, "hits": hits,
            "flag_rate": round(n_flagged / n, 4) if n else None,
            "precision": round(hits / n_flagged, 4) if n_flagged else None,
            "recall": round(hits / n_target, 4) if n_target else None}
