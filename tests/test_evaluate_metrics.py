"""Eval metrics: hand-computed cases, and randomised agreement with independent references
(pytrec_eval for nDCG / recall / MRR; the official SQuAD v1.1 evaluation functions for EM / F1)."""

from __future__ import annotations

import math
import random
import re
import string
from collections import Counter

import numpy as np
import pytest

from amsrag.evaluate.bootstrap import Bootstrap
from amsrag.evaluate.metrics import (
    all_gold_at,
    exact_match,
    f1_score,
    mrr_at,
    ndcg_at,
    normalize_answer,
    query_metrics,
    recall_at,
)

# ---------------------------------------------------------------- the official SQuAD v1.1 script (verbatim)
# https://rajpurkar.github.io/SQuAD-explorer/ evaluate-v1.1.py: normalize_answer, f1_score,
# exact_match_score, metric_max_over_ground_truths — the reference, copied unchanged.


def squad_normalize_answer(s):
    """Lower text and remove punctuation, articles and extra whitespace."""
    def remove_articles(text):
        return re.sub(r'\b(a|an|the)\b', ' ', text)

    def white_space_fix(text):
        return ' '.join(text.split())

    def remove_punc(text):
        exclude = set(string.punctuation)
        return ''.join(ch for ch in text if ch not in exclude)

    def lower(text):
        return text.lower()

    return white_space_fix(remove_articles(remove_punc(lower(s))))


def squad_f1_score(prediction, ground_truth):
    prediction_tokens = squad_normalize_answer(prediction).split()
    ground_truth_tokens = squad_normalize_answer(ground_truth).split()
    common = Counter(prediction_tokens) & Counter(ground_truth_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return 0
    precision = 1.0 * num_same / len(prediction_tokens)
    recall = 1.0 * num_same / len(ground_truth_tokens)
    f1 = (2 * precision * recall) / (precision + recall)
    return f1


def squad_exact_match_score(prediction, ground_truth):
    return (squad_normalize_answer(prediction) == squad_normalize_answer(ground_truth))


def squad_metric_max_over_ground_truths(metric_fn, prediction, ground_truths):
    scores_for_ground_truths = []
    for ground_truth in ground_truths:
        score = metric_fn(prediction, ground_truth)
        scores_for_ground_truths.append(score)
    return max(scores_for_ground_truths)


# ---------------------------------------------------------------- hand-computed cases


def test_normalisation_and_answer_metrics_by_hand():
    assert normalize_answer("The  Eiffel-Tower!") == "eiffeltower"
    assert normalize_answer("a cat, an apple and the dog") == "cat apple and dog"
    assert exact_match("the Beatles.", ["Beatles", "Fab Four"]) == 1.0
    assert exact_match("Beatles band", ["Beatles"]) == 0.0
    assert exact_match("anything", []) == 0.0
    # pred "barack obama" vs gold "obama": precision 1/2, recall 1 -> F1 2/3
    assert f1_score("Barack Obama", ["Obama"]) == pytest.approx(2 / 3)
    assert f1_score("Barack Obama", ["Obama", "Barack Hussein Obama"]) == pytest.approx(0.8)  # max over aliases
    assert f1_score("the", ["a"]) == 0.0  # both normalise to nothing: no common token (v1.1 script)
    assert f1_score("x", []) == 0.0


def test_retrieval_metrics_by_hand():
    ranked = ["a", "x", "b", "y", "z", "c"]
    gold = ["a", "b", "c"]
    dcg = 1 + 1 / math.log2(4)
    idcg = 1 + 1 / math.log2(3) + 1 / math.log2(4)
    assert ndcg_at(ranked, gold, 5) == pytest.approx(dcg / idcg)
    assert recall_at(ranked, gold, 5) == pytest.approx(2 / 3)
    assert all_gold_at(ranked, gold, 5) == 0.0
    assert all_gold_at(ranked, gold, 6) == 1.0
    assert mrr_at(["x", "y", "a"], gold, 10) == pytest.approx(1 / 3)
    assert mrr_at(["x"] * 0 + [f"n{i}" for i in range(10)] + ["a"], gold, 10) == 0.0  # first hit at rank 11
    # one gold passage: the ideal DCG counts min(|gold|, k) = 1 relevant passage
    assert ndcg_at(["x", "a"], ["a"], 5) == pytest.approx(1 / math.log2(3))
    assert ndcg_at(["a"], ["a"], 5) == 1.0
    with pytest.raises(ValueError):
        ndcg_at(["a"], [], 5)


def test_query_metrics_marks_what_does_not_apply():
    m = query_metrics("Paris", ["Paris"], ["p1", "p2"], [], multi_hop=False)  # zero-hop: no gold passages
    assert m["em"] == 1.0 and m["f1"] == 1.0
    assert all(math.isnan(m[k]) for k in ("ndcg@5", "recall@5", "mrr@10", "all_gold@5"))
    m = query_metrics(None, ["Paris"], ["p1", "p2"], ["p2"], multi_hop=False)
    assert math.isnan(m["em"]) and m["ndcg@5"] == pytest.approx(1 / math.log2(3)) and math.isnan(m["all_gold@5"])
    m = query_metrics("x", ["y"], ["g1", "g2"], ["g1", "g2"], multi_hop=True)
    assert m["all_gold@5"] == 1.0 and m["em"] == 0.0


# ---------------------------------------------------------------- randomised reference checks

WORDS = ["the", "a", "an", "Paris", "paris", "city", "of", "light", "Obama", "Barack", "1961", "U.S.", "river",
         "Thames", "–", "'s", "co-founder", "!", ",", "and", "THE", "Élysée"]


def _phrase(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 5))) + rng.choice(["", ".", "?", "  "])


def test_em_f1_match_the_official_squad_script_on_random_cases():
    rng = random.Random(7)
    for _ in range(2000):
        pred = _phrase(rng)
        golds = [_phrase(rng) for _ in range(rng.randint(1, 3))]
        assert normalize_answer(pred) == squad_normalize_answer(pred)
        assert exact_match(pred, golds) == float(
            squad_metric_max_over_ground_truths(squad_exact_match_score, pred, golds))
        assert f1_score(pred, golds) == pytest.approx(
            squad_metric_max_over_ground_truths(squad_f1_score, pred, golds), abs=1e-12)


def test_ndcg_recall_mrr_match_pytrec_eval_on_random_cases():
    pytrec_eval = pytest.importorskip("pytrec_eval")
    rng = random.Random(11)
    docs = [f"d{i}" for i in range(30)]
    qrels, runs, ours = {}, {}, {}
    for q in range(300):
        gold = rng.sample(docs, rng.randint(1, 4))
        ranked = rng.sample(docs, rng.randint(1, 15))
        qid = f"q{q}"
        qrels[qid] = {d: 1 for d in gold}
        # distinct descending scores: pytrec_eval ranks by score
        runs[qid] = {d: float(len(ranked) - i) for i, d in enumerate(ranked[:10])}
        ours[qid] = {"ndcg_cut_5": ndcg_at(ranked, gold, 5), "recall_5": recall_at(ranked, gold, 5),
                     "recip_rank": mrr_at(ranked, gold, 10)}
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.5", "recall.5", "recip_rank"})
    ref = evaluator.evaluate(runs)
    for qid, mine in ours.items():
        for measure, value in mine.items():
            assert value == pytest.approx(ref[qid][measure], abs=1e-9), (qid, measure)


# ---------------------------------------------------------------- bootstrap


def test_bootstrap_ci_brackets_the_mean_and_is_seeded():
    rng = np.random.default_rng(3)
    values = rng.random(200)
    boot = Bootstrap.draw(200, 1000, seed=5)
    lo, hi = boot.ci(values)
    assert lo < values.mean() < hi
    assert (lo, hi) == Bootstrap.draw(200, 1000, seed=5).ci(values)
    # standard error of the mean ~ 0.29 / sqrt(200) = 0.020: the 95% interval is about +-0.04
    assert 0.05 < hi - lo < 0.11


def test_bootstrap_skips_nan_and_paired_p_values():
    boot = Bootstrap.draw(300, 1000, seed=1)
    rng = np.random.default_rng(2)
    base = rng.random(300)
    assert boot.paired_p(base, base) == 1.0
    better = base + 0.2
    assert boot.paired_p(better, base) < 0.01
    noise = base + rng.normal(0, 0.05, 300)  # no systematic difference
    assert boot.paired_p(noise, base) > 0.05
    with_nan = base.copy()
    with_nan[::3] = np.nan
    lo, hi = boot.ci(with_nan)
    assert lo < np.nanmean(with_nan) < hi
    assert boot.ci(np.full(300, np.nan)) is None
    with pytest.raises(ValueError):
        boot.means(np.zeros(5))
