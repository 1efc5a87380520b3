"""Answer and retrieval metrics of one query (DESIGN §7).

EM / F1 follow the official SQuAD v1.1 evaluation script (lower case, punctuation and the articles
a/an/the removed, white space collapsed; token F1 over the bag of tokens), max over the gold aliases.
Retrieval metrics use binary relevance of the gold passages; the ideal DCG of nDCG@k runs over
min(|gold|, k) relevant passages.
"""

from __future__ import annotations

import math
import re
import string
from collections import Counter
from collections.abc import Sequence

_PUNCT = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(s: str) -> str:
    """The SQuAD v1.1 normalisation."""
    s = s.lower()
    s = "".join(ch for ch in s if ch not in _PUNCT)
    s = _ARTICLES.sub(" ", s)
    return " ".join(s.split())


def _f1(prediction: str, truth: str) -> float:
    pred, gold = normalize_answer(prediction).split(), normalize_answer(truth).split()
    common = Counter(pred) & Counter(gold)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred), same / len(gold)
    return 2 * precision * recall / (precision + recall)


def exact_match(prediction: str, answers: Sequence[str]) -> float:
    """1.0 when the normalised prediction equals a normalised gold alias (0.0 with no aliases)."""
    p = normalize_answer(prediction)
    return float(any(p == normalize_answer(a) for a in answers))


def f1_score(prediction: str, answers: Sequence[str]) -> float:
    return max((_f1(prediction, a) for a in answers), default=0.0)


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
