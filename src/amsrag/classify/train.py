"""Training: embed the labelled questions (cached), fit the two heads, calibrate them, fit the zero-hop gate."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from amsrag.classify.calibration import CalibrationMethod, fit_calibrator
from amsrag.classify.data import LabelledData, LabelledQuestion, Split
from amsrag.classify.embedding import embed_questions
from amsrag.classify.features import features_batch
from amsrag.classify.model import ComplexityClassifier, Head, decide
from amsrag.embed.encoder import Encoder
from amsrag.types import COMPLEXITIES

ZERO, ONE, MULTI = 0, 1, 2
NEVER_LOGIT = 1e9  # gate threshold meaning "never zero_hop"
CONFIDENT = 0.90


@dataclass(frozen=True, slots=True)
class TrainConfig:
    seed: int = 13
    cap: int | None = 5000  # dataset-derived rows per source data set
    hop_c: float = 0.2
    knowledge_c: float = 0.002
    hop_features: bool = True
    knowledge_features: bool = True
    calibration: CalibrationMethod = "temperature"
    max_downward: float = 0.05  # cap on the cal confident-downward rate when fitting the gate


@dataclass(slots=True)
class Prepared:
    """Rows with their embeddings and features, aligned."""

    rows: list[LabelledQuestion]
    embeddings: np.ndarray
    features: np.ndarray

    def mask(self, split: Split, silver3: bool | None = None, source: str | None = None) -> np.ndarray:
        m = np.array([r.split == split for r in self.rows])
        if silver3 is not None:
            m &= np.array([(r.three is not None) == silver3 for r in self.rows])
        if source is not None:
            m &= np.array([r.source == source for r in self.rows])
        return m

    @property
    def hop_y(self) -> np.ndarray:
        return np.array([1 if r.hop == "multi_hop" else 0 for r in self.rows])

    @property
    def three_y(self) -> np.ndarray:
        """Silver three-way label index (-1 where there is none)."""
        return np.array([COMPLEXITIES.index(r.three) if r.three else -1 for r in self.rows])


def prepare(
    data: LabelledData, encoder: Encoder, cache_dir: Path | None = None, progress: Callable[[int], None] | None = None
) -> Prepared:
    questions = [r.question for r in data.rows]
    embeddings = embed_questions(questions, encoder, cache_dir=cache_dir, progress=progress)
    return Prepared(rows=list(data.rows), embeddings=embeddings, features=features_batch(questions))


def fit_head(
    embeddings: np.ndarray, features: np.ndarray, y: np.ndarray, use_features: bool, c: float, seed: int
) -> Head:
    """Balanced logistic regression over standardised inputs (uncalibrated)."""
    from sklearn.linear_model import LogisticRegression

    x = np.hstack([embeddings, features]) if use_features else embeddings
    x = np.asarray(x, dtype=np.float64)
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale < 1e-9] = 1.0
    lr = LogisticRegression(C=c, class_weight="balanced", max_iter=5000, random_state=seed)
    lr.fit((x - mean) / scale, y)
    return Head(coef=lr.coef_[0].astype(np.float64), intercept=float(lr.intercept_[0]), mean=mean, scale=scale,
                use_features=use_features)


def zero_logit_for(head: Head, tau: float) -> float:
    """The smallest raw logit whose calibrated p(zero_hop) reaches tau (bisection; calibrators are monotone)."""
    lo, hi = -60.0, 60.0
    if float(head.calibrator.prob1(np.array([hi]))[0]) < tau:
        return NEVER_LOGIT
    for _ in range(80):
        mid = (lo + hi) / 2
        if float(head.calibrator.prob1(np.array([mid]))[0]) >= tau:
            hi = mid
        else:
            lo = mid
    return max(hi, 0.0)


def confident_downward(labels: np.ndarray, alpha: np.ndarray, hop_y: np.ndarray) -> float:
    """Share of multi_hop rows predicted cheaper (zero or one) with alpha >= 0.90."""
    multi = hop_y == 1
    if not multi.any():
        return 0.0
    return float(np.mean((labels[multi] != MULTI) & (alpha[multi] >= CONFIDENT)))


def fit_gate(clf: ComplexityClassifier, prep: Prepared, max_downward: float) -> tuple[float, float, list[dict]]:
    """tau maximising three-way accuracy on the calibration split's silver rows (ties: the higher tau),
    subject to the confident-downward rate on the split's multi_hop rows staying under `max_downward`."""
    cal = prep.mask("cal")
    e, f = prep.embeddings[cal], prep.features[cal]
    zh, zk = clf.raw_logits(e, f)
    y3, yh = prep.three_y[cal], prep.hop_y[cal]
    silver = y3 >= 0
    p_zero = clf.knowledge.calibrator.prob1(zk)
    trace, best = [], (-1.0, NEVER_LOGIT, 1.01)
    for tau in [*np.round(np.arange(0.50, 0.991, 0.01), 2).tolist(), 1.01]:
        zl = NEVER_LOGIT if tau > 1 else zero_logit_for(clf.knowledge, tau)
        label, gate = decide(zh, zk, zl)
        clf.zero_logit = zl
        _, probs = clf.probabilities(e, f)
        alpha = probs.max(axis=1)
        acc = float(np.mean(label[silver] == y3[silver])) if silver.any() else 0.0
        down = confident_downward(label, alpha, yh)
        trace.append({"tau": tau, "silver_accuracy": acc, "confident_downward": down,
                      "zero_rate": float(np.mean(gate)), "max_p_zero": float(p_zero.max(initial=0.0))})
        if down <= max_downward and acc >= best[0]:
            best = (acc, zl, tau)
    clf.zero_logit = best[1]
    return best[2], best[1], trace


def calibrate(clf: ComplexityClassifier, prep: Prepared, method: CalibrationMethod, max_downward: float) -> dict:
    """Refit both heads' calibrators and the gate on the calibration split (in place)."""
    # The hop head is calibrated on the dataset-derived rows (clean hop labels); the knowledge head on silver rows.
    cal = prep.mask("cal", source="dataset")
    cal_silver = prep.mask("cal", silver3=True)
    zh = clf.hop.logits(prep.embeddings[cal], prep.features[cal])
    clf.hop = clf.hop.with_calibrator(fit_calibrator(method, zh, prep.hop_y[cal]))
    zk = clf.knowledge.logits(prep.embeddings[cal_silver], prep.features[cal_silver])
    clf.knowledge = clf.knowledge.with_calibrator(fit_calibrator(method, zk, (prep.three_y[cal_silver] == ZERO)))
    tau, zero_logit, trace = fit_gate(clf, prep, max_downward)
    info = {"method": method, "tau": tau, "zero_logit": zero_logit,
            "hop_params": {k: v.tolist() for k, v in clf.hop.calibrator.params().items() if v.size <= 4},
            "knowledge_params": {k: v.tolist() for k, v in clf.knowledge.calibrator.params().items() if v.size <= 4}}
    clf.meta["calibration"] = info
    clf.meta["gate_trace"] = [t for t in trace if t["tau"] in (0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.01) or t["tau"] == tau]
    return info


def train(data: LabelledData, prep: Prepared, config: TrainConfig, model_id: str) -> ComplexityClassifier:
    train_rows = prep.mask("train")
    hop = fit_head(prep.embeddings[train_rows], prep.features[train_rows], prep.hop_y[train_rows],
                   config.hop_features, config.hop_c, config.seed)
    silver = prep.mask("train", silver3=True)
    knowledge = fit_head(prep.embeddings[silver], prep.features[silver], (prep.three_y[silver] == ZERO).astype(int),
                         config.knowledge_features, config.knowledge_c, config.seed)
    meta: dict[str, Any] = {
        "embedding_model": model_id,
        "training_data": {"sha256": data.sha256, "rows": len(data.rows), "counts": data.counts()},
        "train_config": asdict(config),
    }
    clf = ComplexityClassifier(hop, knowledge, NEVER_LOGIT, meta=meta)
    calibrate(clf, prep, config.calibration, config.max_downward)
    return clf
