"""Training: embed the labelled questions (cached), fit the two heads, calibrate them, fit the zero-hop gate."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from amsrag.calibration import CalibrationMethod, fit_calibrator
from amsrag.classify.features import features_batch
from amsrag.classify.model import ComplexityClassifier, Head, decide, head_inputs
from amsrag.embed.encoder import Encoder
from amsrag.ingest.datasets import LabelledQuestion, Split
from amsrag.learn.classifier.data import LabelledData
from amsrag.learn.common import embed_questions, standardise
from amsrag.types import COMPLEXITIES

ZERO, ONE, MULTI = 0, 1, 2
GateSource = Literal["cal", "cal+oof"]
NEVER_LOGIT = 1e9  # gate threshold meaning "never zero_hop"
CONFIDENT = 0.90


@dataclass(frozen=True, slots=True)
class TrainConfig:
    seed: int = 13
    cap: int | None = 5000  # dataset-derived rows per source data set
    hop_c: float = 0.2
    knowledge_c: float = 0.1
    hop_features: bool = True
    knowledge_features: bool = True
    # The knowledge head sees the cheap features only: on ~800 silver rows the 384-d embedding overfits
    # (5-fold CV AUC ~0.67-0.71 with it vs ~0.71-0.73 without; see docs/benchmarks/classifier.md).
    knowledge_embedding: bool = False
    calibration: CalibrationMethod = "temperature"
    max_downward: float = 0.05  # cap on the cal confident-downward rate when fitting the gate
    # rows whose silver three-way accuracy the gate maximises: the cal split's silver rows alone, or with the
    # out-of-fold silver train rows ("cal+oof", ~930 rows instead of ~100)
    gate_rows: GateSource = "cal+oof"


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
    embeddings: np.ndarray, features: np.ndarray, y: np.ndarray, use_features: bool, c: float, seed: int,
    use_embedding: bool = True,
) -> Head:
    """Balanced logistic regression over standardised inputs (uncalibrated)."""
    from sklearn.linear_model import LogisticRegression

    x = head_inputs(embeddings, features, use_embedding, use_features)
    mean, scale = standardise(x)
    lr = LogisticRegression(C=c, class_weight="balanced", max_iter=5000, random_state=seed)
    lr.fit((x - mean) / scale, y)
    return Head(coef=lr.coef_[0].astype(np.float64), intercept=float(lr.intercept_[0]), mean=mean, scale=scale,
                use_features=use_features, use_embedding=use_embedding)


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


@dataclass(frozen=True, slots=True)
class GateRows:
    """Extra silver rows for fitting the gate: raw hop and knowledge logits and the three-way label."""

    hop_logits: np.ndarray
    knowledge_logits: np.ndarray
    three_y: np.ndarray


def knowledge_oof(prep: Prepared, config: TrainConfig, folds: int = 5) -> tuple[np.ndarray, np.ndarray]:
    """(out-of-fold knowledge logits, three-way labels) of the silver train rows: each fold scored by a knowledge
    head refitted on the other folds, so a gate fitted on them does not see its head's own training rows."""
    from sklearn.model_selection import StratifiedKFold

    rows = np.flatnonzero(prep.mask("train", silver3=True))
    y3 = prep.three_y[rows]
    yk = (y3 == ZERO).astype(int)
    out = np.zeros(len(rows))
    for a, b in StratifiedKFold(folds, shuffle=True, random_state=config.seed).split(rows, yk):
        head = fit_head(prep.embeddings[rows[a]], prep.features[rows[a]], yk[a], config.knowledge_features,
                        config.knowledge_c, config.seed, config.knowledge_embedding)
        out[b] = head.logits(prep.embeddings[rows[b]], prep.features[rows[b]])
    return out, y3


def fit_gate(
    clf: ComplexityClassifier, prep: Prepared, max_downward: float, extra: GateRows | None = None
) -> tuple[float, float, list[dict]]:
    """tau maximising three-way accuracy on the calibration split's silver rows plus `extra` silver rows (the
    out-of-fold train rows: ~9x more than cal's ~100, which cannot tell gates a few points apart), ties: the
    higher tau, subject to the confident-downward rate on the cal split's multi_hop rows staying under
    `max_downward`."""
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
        right, n = int(np.sum(label[silver] == y3[silver])), int(silver.sum())
        cal_acc = right / n if n else 0.0
        if extra is not None and len(extra.three_y):
            extra_label, _ = decide(extra.hop_logits, extra.knowledge_logits, zl)
            right, n = right + int(np.sum(extra_label == extra.three_y)), n + len(extra.three_y)
        acc = right / n if n else 0.0
        down = confident_downward(label, alpha, yh)
        trace.append({"tau": tau, "silver_accuracy": acc, "cal_silver_accuracy": cal_acc,
                      "confident_downward": down, "zero_rate": float(np.mean(gate)),
                      "max_p_zero": float(p_zero.max(initial=0.0))})
        if down <= max_downward and acc >= best[0]:
            best = (acc, zl, tau)
    clf.zero_logit = best[1]
    return best[2], best[1], trace


def calibrate(clf: ComplexityClassifier, prep: Prepared, config: TrainConfig,
              method: CalibrationMethod | None = None) -> dict:
    """Refit both heads' calibrators and the gate on the calibration split (in place)."""
    method = method or config.calibration
    # The hop head is calibrated on the dataset-derived rows (clean hop labels); the knowledge head on silver rows.
    cal = prep.mask("cal", source="dataset")
    cal_silver = prep.mask("cal", silver3=True)
    zh = clf.hop.logits(prep.embeddings[cal], prep.features[cal])
    clf.hop = clf.hop.with_calibrator(fit_calibrator(method, zh, prep.hop_y[cal]))
    zk = clf.knowledge.logits(prep.embeddings[cal_silver], prep.features[cal_silver])
    clf.knowledge = clf.knowledge.with_calibrator(fit_calibrator(method, zk, (prep.three_y[cal_silver] == ZERO)))
    extra = None
    if config.gate_rows == "cal+oof":
        zk, y3 = knowledge_oof(prep, config)
        tr = prep.mask("train", silver3=True)
        extra = GateRows(clf.hop.logits(prep.embeddings[tr], prep.features[tr]), zk, y3)
    tau, zero_logit, trace = fit_gate(clf, prep, config.max_downward, extra)
    info = {"method": method, "tau": tau, "zero_logit": zero_logit, "gate_rows": config.gate_rows,
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
                         config.knowledge_features, config.knowledge_c, config.seed, config.knowledge_embedding)
    meta: dict[str, Any] = {
        "embedding_model": model_id,
        "training_data": {"sha256": data.sha256, "rows": len(data.rows), "counts": data.counts()},
        "train_config": asdict(config),
    }
    clf = ComplexityClassifier(hop, knowledge, NEVER_LOGIT, meta=meta)
    calibrate(clf, prep, config)
    return clf
