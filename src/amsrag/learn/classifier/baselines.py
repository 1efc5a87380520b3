"""Baselines for the report: random, majority, and wh-word / keyword rules.

Each returns (label index (n,), probs (n, 3)) over COMPLEXITIES, like `ComplexityClassifier.probabilities`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from amsrag.classify.features import FEATURE_NAMES, features_batch

_F = {name: i for i, name in enumerate(FEATURE_NAMES)}
_ZERO_PATTERNS = re.compile(
    r"^(who (wrote|painted|invented|discovered|composed|sang|directed)|what is the (capital|currency|chemical symbol)|"
    r"in which (country|city|continent)|what (language|color|colour))\b", re.I)


def random_baseline(n: int, seed: int = 13) -> tuple[np.ndarray, np.ndarray]:
    """Uniformly random labels; the honest confidence of a uniform guess is 1/3."""
    rng = np.random.default_rng(seed)
    return rng.integers(0, 3, size=n), np.full((n, 3), 1.0 / 3.0)


def majority_baseline(n: int, prior: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    """Always the most frequent training class, with the training prior as its probabilities."""
    p = np.asarray(prior, dtype=np.float64)
    p = p / p.sum()
    return np.full(n, int(np.argmax(p))), np.tile(p, (n, 1))


def rule_labels(questions: Sequence[str]) -> np.ndarray:
    """multi_hop on comparison patterns or nested relations; zero_hop on short famous-fact patterns; else one_hop."""
    f = features_batch(questions)
    comparison = (f[:, _F["or_choice"]] > 0) & ((f[:, _F["comparative"]] > 0) | (f[:, _F["same_both"]] > 0))
    comparison |= (f[:, _F["same_both"]] > 0) & (f[:, _F["wh_yesno"]] > 0)
    nested = (f[:, _F["relative_words"]] + f[:, _F["of_the"]] + f[:, _F["possessive"]]) >= 2
    words = np.expm1(f[:, _F["log_words"]])
    zero = np.array([bool(_ZERO_PATTERNS.search(q.strip())) for q in questions]) & (words <= 9)
    return np.where(comparison | nested, 2, np.where(zero, 0, 1))


class RuleBaseline:
    """The rules, each label's confidence set to its precision on the training rows."""

    def __init__(self, confidence: Sequence[float] = (0.5, 0.5, 0.5)) -> None:
        self.confidence = np.asarray(confidence, dtype=np.float64)

    def fit(self, questions: Sequence[str], y: np.ndarray) -> RuleBaseline:
        pred = rule_labels(questions)
        conf = []
        for c in range(3):
            m = pred == c
            conf.append(float(np.mean(y[m] == c)) if m.any() else 1.0 / 3.0)
        self.confidence = np.clip(np.asarray(conf), 1.0 / 3.0, 1.0)
        return self

    def predict(self, questions: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        pred = rule_labels(questions)
        conf = self.confidence[pred]
        probs = np.repeat(((1.0 - conf) / 2.0)[:, None], 3, axis=1)
        probs[np.arange(len(pred)), pred] = conf
        return pred, probs
