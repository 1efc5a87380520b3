"""Calibration of the reader's quote: P(the sentence holding the chosen span holds a gold answer).

When the span is unsure (its confidence below the reader's threshold) but its sentence very likely holds the
answer, the extractive generator answers with the sentence (`SpanReaderGenerator`). The probability is a
logistic regression of "the quote holds a gold answer" on the quote's features (`SpanReader._quote`), fitted
on reads of the calibration split (gold, gold + 3 distractors, 4 distractors: in the last, no quote holds the
answer) and checked on the test split. The threshold maximises an expected utility over the reads where the
span abstains: a sentence holding the answer scores 1, an abstention on a read without the answer scores 1,
an abstention where the answer was there scores 0, and a sentence without the answer costs `wrong_cost`
(1 by default: a sentence answer must be more likely right than wrong — a user is better served by "not sure"
than by a wrong sentence).
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from amsrag.generate.reader_model import SpanReader
from amsrag.learn.reader.data import Item, find_answer

FEATURES = ("score", "margin", "prob", "sentence_mass", "sentence_share", "sentence_spans", "sentence_words",
            "retrieval")


def read_quotes(reader: SpanReader, items: Sequence[Item], seed: int) -> list[dict[str, Any]]:
    """One record per read: the span's confidence, the quote's features and whether it holds a gold answer."""
    from amsrag.learn.reader.evaluate import read_settings

    recs = []
    for it, setting, passages in read_settings(items, seed):
        r = reader.read(it.question, passages)
        if r.quote is None:
            continue
        holds = setting != "none" and find_answer(r.quote.text, it.answers) is not None
        recs.append({"id": it.id, "dataset": it.dataset, "setting": setting, "span_confidence": r.confidence,
                     "span_abstained": r.confidence < reader.threshold, "holds": holds,
                     "features": {f: float(r.quote_features.get(f, 0.0)) for f in FEATURES}})
    return recs


def _design(recs: Sequence[dict[str, Any]]) -> tuple[np.ndarray, np.ndarray]:
    x = np.array([[r["features"][f] for f in FEATURES] for r in recs])
    y = np.array([1 if r["holds"] else 0 for r in recs])
    return x, y


def _probs(x: np.ndarray, coef: np.ndarray, intercept: float) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.clip(x @ coef + intercept, -40, 40)))


def ece(p: np.ndarray, y: np.ndarray, bins: int = 10) -> float:
    """Expected calibration error over equal-width bins."""
    edges = np.linspace(0, 1, bins + 1)
    idx = np.clip(np.digitize(p, edges[1:-1]), 0, bins - 1)
    total = 0.0
    for b in range(bins):
        m = idx == b
        if m.any():
            total += m.mean() * abs(float(p[m].mean()) - float(y[m].mean()))
    return total


def fit_quote_calibration(cal: Sequence[dict[str, Any]], test: Sequence[dict[str, Any]],
                          unanswerable_share: float = 0.25, wrong_cost: float = 1.0) -> dict[str, Any]:
    """The card's `quote_calibration`: coefficients, threshold, and the test split's AUC / ECE / precision."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score

    x, y = _design(cal)
    lr = LogisticRegression(C=1.0, max_iter=2000).fit(x, y)
    coef, icpt = lr.coef_[0], float(lr.intercept_[0])
    unsure = [r for r in cal if r["span_abstained"]]
    xu, yu = _design(unsure)
    pu = _probs(xu, coef, icpt)
    ans = np.array([r["setting"] != "none" for r in unsure])
    w = np.where(ans, (1 - unanswerable_share) / max(ans.sum(), 1), unanswerable_share / max((~ans).sum(), 1))
    best_t, best_u = 1.0, float((w * np.where(ans, 0.0, 1.0)).sum())  # never answer with the sentence
    for t in np.linspace(0.05, 0.95, 91):
        keep = pu >= t
        u = float((w * np.where(keep, np.where(yu == 1, 1.0, -wrong_cost), np.where(ans, 0.0, 1.0))).sum())
        if u > best_u + 1e-9:
            best_t, best_u = float(t), u
    xt, yt = _design(test)
    pt = _probs(xt, coef, icpt)
    tu = [i for i, r in enumerate(test) if r["span_abstained"]]
    kept = [i for i in tu if pt[i] >= best_t]
    return {"features": list(FEATURES), "coef": dict(zip(FEATURES, (round(float(c), 5) for c in coef), strict=True)),
            "intercept": round(icpt, 5), "threshold": round(best_t, 3),
            "objective": f"expected utility over the reads where the span abstains, {unanswerable_share:.0%} of "
                         "reads without the answer (a quote holding the answer or an abstention there scores 1, "
                         f"a quote without it {-wrong_cost:g})",
            "fitted_on": f"{len(cal)} reads of the calibration split ({len(unsure)} where the span abstains)",
            "test": {"reads": len(test), "auc": round(float(roc_auc_score(yt, pt)), 4) if len(set(yt)) > 1 else None,
                     "ece": round(ece(pt, yt), 4), "span_abstained": len(tu), "answered_with_sentence": len(kept),
                     "sentence_precision": round(float(np.mean([yt[i] for i in kept])), 4) if kept else None,
                     "mean_confidence_answered": round(float(np.mean([pt[i] for i in kept])), 4) if kept else None}}


def calibrate_quotes(reader: SpanReader, items: Sequence[Item], seed: int, per_dataset: int,
                     reads: Path | None = None, wrong_cost: float = 1.0) -> dict[str, Any]:
    """Read `per_dataset` calibration and test items per data set and fit the quote calibration. `reads`: a
    JSON file of the reads — written after reading, and read instead of reading again when it exists for the
    same seed and size (a refit with another objective then takes a second, not half an hour)."""
    key = {"seed": seed, "per_dataset": per_dataset, "features": list(FEATURES)}
    if reads is not None and reads.is_file():
        stored = json.loads(reads.read_text(encoding="utf-8"))
        if stored.get("key") == key:
            return fit_quote_calibration(stored["cal"], stored["test"], wrong_cost=wrong_cost)
    rng = random.Random(seed)

    def pick(split: str) -> list[Item]:
        by_ds: dict[str, list[Item]] = {}
        for it in items:
            if it.split == split:
                by_ds.setdefault(it.dataset, []).append(it)
        return [x for _, its in sorted(by_ds.items()) for x in rng.sample(its, min(per_dataset, len(its)))]

    cal = read_quotes(reader, pick("cal"), seed + 1)
    test = read_quotes(reader, pick("test"), seed + 2)
    if reads is not None:
        reads.write_text(json.dumps({"key": key, "cal": cal, "test": test}), encoding="utf-8")
    return fit_quote_calibration(cal, test, wrong_cost=wrong_cost)
