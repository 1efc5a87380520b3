"""Training: embed the labelled questions (cached), fit the hop head (and the knowledge head when a generator
labelled questions), calibrate on a calibration mix of data sets, fit the zero-hop gate."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from amsrag.calibration import CalibrationMethod, fit_calibrator
from amsrag.classify.features import features_batch
from amsrag.classify.model import ComplexityClassifier, Head, comparisons, decide, head_inputs
from amsrag.embed.encoder import Encoder
from amsrag.ingest.datasets import LabelledQuestion, Split
from amsrag.learn.classifier.data import IMPLICIT_DATASET, LabelledData
from amsrag.learn.common import embed_questions, seeded_rank, standardise
from amsrag.types import COMPLEXITIES

ZERO, ONE, MULTI = 0, 1, 2
GateSource = Literal["cal", "cal+oof"]
NEVER_LOGIT = 1e9  # gate threshold meaning "never zero_hop"
CONFIDENT = 0.90


@dataclass(frozen=True, slots=True)
class TrainConfig:
    seed: int = 13
    cap: int | None = None  # rows per data set (None: all)
    hop_c: float = 0.2
    knowledge_c: float = 0.1
    hop_features: bool = True
    knowledge_features: bool = True
    # The knowledge head sees the cheap features only: on the few hundred rows a generator labels, the 384-d
    # embedding overfits (see docs/benchmarks/classifier.md).
    knowledge_embedding: bool = False
    # every data set weighs the same in the hop head's loss, whatever its size: the head must not learn the
    # biggest data set's style as "one_hop"
    balance_datasets: bool = True
    calibration: CalibrationMethod = "temperature"
    calibration_rows_per_dataset: int = 400  # the calibration mix: at most this many cal rows per data set
    max_downward: float = 0.05  # cap on the cal confident-downward rate when fitting the gate
    gate_rows: GateSource = "cal+oof"
    # StrategyQA's implicit questions as multi_hop rows (`data.load_implicit_rows`); False in cards made before
    implicit: bool = False
    # StrategyQA's share of the hop head's loss, relative to any other data set's (1.0: the same)
    implicit_weight: float = 1.0


@dataclass(slots=True)
class Prepared:
    """Rows with their embeddings and features, aligned."""

    rows: list[LabelledQuestion]
    embeddings: np.ndarray
    features: np.ndarray
    comparison: np.ndarray

    def mask(self, split: Split | None = None, silver3: bool | None = None, dataset: str | None = None,
             exclude_dataset: str | None = None) -> np.ndarray:
        m = np.ones(len(self.rows), dtype=bool)
        if split is not None:
            m &= np.array([r.split == split for r in self.rows])
        if silver3 is not None:
            m &= np.array([(r.three is not None) == silver3 for r in self.rows])
        if dataset is not None:
            m &= self.datasets == dataset
        if exclude_dataset is not None:
            m &= self.datasets != exclude_dataset
        return m

    @property
    def datasets(self) -> np.ndarray:
        return np.array([r.dataset for r in self.rows])

    @property
    def hop_y(self) -> np.ndarray:
        return np.array([1 if r.hop == "multi_hop" else 0 for r in self.rows])

    @property
    def three_y(self) -> np.ndarray:
        """Three-way label index (-1 where there is none)."""
        return np.array([COMPLEXITIES.index(r.three) if r.three else -1 for r in self.rows])


def prepare(
    data: LabelledData, encoder: Encoder, cache_dir: Path | None = None, progress: Callable[[int], None] | None = None
) -> Prepared:
    questions = [r.question for r in data.rows]
    embeddings = embed_questions(questions, encoder, cache_dir=cache_dir, progress=progress)
    features = features_batch(questions)
    return Prepared(rows=list(data.rows), embeddings=embeddings, features=features, comparison=comparisons(features))


def dataset_weights(datasets: np.ndarray) -> np.ndarray:
    """Per-row weights giving every data set the same total weight (mean weight 1)."""
    counts = Counter(datasets.tolist())
    w = np.array([1.0 / counts[d] for d in datasets.tolist()])
    return w * len(w) / w.sum()


def fit_head(
    embeddings: np.ndarray, features: np.ndarray, y: np.ndarray, use_features: bool, c: float, seed: int,
    use_embedding: bool = True, sample_weight: np.ndarray | None = None,
) -> Head:
    """Balanced logistic regression over standardised inputs (uncalibrated)."""
    from sklearn.linear_model import LogisticRegression

    x = head_inputs(embeddings, features, use_embedding, use_features)
    mean, scale = standardise(x)
    lr = LogisticRegression(C=c, class_weight="balanced", max_iter=5000, random_state=seed)
    lr.fit((x - mean) / scale, y, sample_weight=sample_weight)
    return Head(coef=lr.coef_[0].astype(np.float64), intercept=float(lr.intercept_[0]), mean=mean, scale=scale,
                use_features=use_features, use_embedding=use_embedding)


def fit_hop_head(prep: Prepared, rows: np.ndarray, config: TrainConfig) -> Head:
    weights = dataset_weights(prep.datasets[rows]) if config.balance_datasets else None
    if config.implicit_weight != 1.0:
        weights = np.ones(int(rows.sum())) if weights is None else weights
        weights = np.where(prep.datasets[rows] == IMPLICIT_DATASET, weights * config.implicit_weight, weights)
    return fit_head(prep.embeddings[rows], prep.features[rows], prep.hop_y[rows], config.hop_features,
                    config.hop_c, config.seed, sample_weight=weights)


def calibration_mix(prep: Prepared, rows: np.ndarray, per_dataset: int, seed: int) -> np.ndarray:
    """At most `per_dataset` of `rows` per data set (a seeded order picks them): no data set's size sets the
    temperature."""
    out = np.zeros(len(prep.rows), dtype=bool)
    for d in sorted(set(prep.datasets[rows].tolist())):
        idx = sorted(np.flatnonzero(rows & (prep.datasets == d)), key=lambda i: seeded_rank(seed, prep.rows[i].key))
        out[idx[:per_dataset]] = True
    return out


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
    """Extra silver rows for fitting the gate: raw hop and knowledge logits, the comparison flag and the
    three-way label."""

    hop_logits: np.ndarray
    knowledge_logits: np.ndarray
    comparison: np.ndarray
    three_y: np.ndarray


def fit_knowledge_head(prep: Prepared, rows: np.ndarray, config: TrainConfig) -> Head:
    y = (prep.three_y[rows] == ZERO).astype(int)
    return fit_head(prep.embeddings[rows], prep.features[rows], y, config.knowledge_features, config.knowledge_c,
                    config.seed, config.knowledge_embedding)


def knowledge_oof(prep: Prepared, config: TrainConfig, folds: int = 5) -> tuple[np.ndarray, np.ndarray]:
    """(out-of-fold knowledge logits, three-way labels) of the silver train rows: each fold scored by a knowledge
    head refitted on the other folds, so a gate fitted on them does not see its head's own training rows."""
    from sklearn.model_selection import StratifiedKFold

    rows = np.flatnonzero(prep.mask("train", silver3=True))
    y3 = prep.three_y[rows]
    yk = (y3 == ZERO).astype(int)
    out = np.zeros(len(rows))
    n_folds = min(folds, int(np.bincount(yk, minlength=2).min()))
    if n_folds < 2:
        return out[:0], y3[:0]
    for a, b in StratifiedKFold(n_folds, shuffle=True, random_state=config.seed).split(rows, yk):
        mask = np.zeros(len(prep.rows), dtype=bool)
        mask[rows[a]] = True
        head = fit_knowledge_head(prep, mask, config)
        out[b] = head.logits(prep.embeddings[rows[b]], prep.features[rows[b]])
    return out, y3


def fit_gate(
    clf: ComplexityClassifier, prep: Prepared, max_downward: float, extra: GateRows | None = None
) -> tuple[float, float, list[dict]]:
    """tau maximising three-way accuracy on the calibration split's silver rows plus `extra` silver rows (the
    out-of-fold train rows), ties: the higher tau, subject to the confident-downward rate on the cal split's
    multi_hop rows staying under `max_downward`."""
    assert clf.knowledge is not None
    cal = prep.mask("cal")
    e, f, comp = prep.embeddings[cal], prep.features[cal], prep.comparison[cal]
    zh, zk = clf.raw_logits(e, f)
    y3, yh = prep.three_y[cal], prep.hop_y[cal]
    silver = y3 >= 0
    trace, best = [], (-1.0, NEVER_LOGIT, 1.01)
    for tau in [*np.round(np.arange(0.50, 0.991, 0.01), 2).tolist(), 1.01]:
        zl = NEVER_LOGIT if tau > 1 else zero_logit_for(clf.knowledge, tau)
        label, gate = decide(zh, zk, zl, comp)
        clf.zero_logit = zl
        _, probs = clf.probabilities(e, f, comparison=comp)
        alpha = probs.max(axis=1)
        right, n = int(np.sum(label[silver] == y3[silver])), int(silver.sum())
        cal_acc = right / n if n else 0.0
        if extra is not None and len(extra.three_y):
            extra_label, _ = decide(extra.hop_logits, extra.knowledge_logits, zl, extra.comparison)
            right, n = right + int(np.sum(extra_label == extra.three_y)), n + len(extra.three_y)
        acc = right / n if n else 0.0
        down = confident_downward(label, alpha, yh)
        trace.append({"tau": tau, "silver_accuracy": acc, "cal_silver_accuracy": cal_acc,
                      "confident_downward": down, "zero_rate": float(np.mean(gate))})
        if down <= max_downward and acc >= best[0]:
            best = (acc, zl, tau)
    clf.zero_logit = best[1]
    return best[2], best[1], trace


def calibrate_hop(clf: ComplexityClassifier, prep: Prepared, rows: np.ndarray, method: CalibrationMethod) -> None:
    zh = clf.hop.logits(prep.embeddings[rows], prep.features[rows])
    clf.hop = clf.hop.with_calibrator(fit_calibrator(method, zh, prep.hop_y[rows]))


def calibrate(clf: ComplexityClassifier, prep: Prepared, config: TrainConfig,
              method: CalibrationMethod | None = None, exclude_dataset: str | None = None) -> dict:
    """Refit the calibrators and the gate on the calibration split (in place). The hop head is calibrated on
    the calibration mix of data sets; the knowledge head on the generator's silver cal rows."""
    method = method or config.calibration
    mix = calibration_mix(prep, prep.mask("cal", exclude_dataset=exclude_dataset),
                          config.calibration_rows_per_dataset, config.seed)
    calibrate_hop(clf, prep, mix, method)
    info: dict[str, Any] = {"method": method, "hop_rows": int(mix.sum()),
                            "hop_params": {k: v.tolist() for k, v in clf.hop.calibrator.params().items()
                                           if v.size <= 4}}
    if clf.knowledge is None:
        clf.zero_logit = NEVER_LOGIT
        info.update({"tau": None, "zero_logit": NEVER_LOGIT})
        clf.meta["calibration"] = info
        return info
    cal_silver = prep.mask("cal", silver3=True)
    zk = clf.knowledge.logits(prep.embeddings[cal_silver], prep.features[cal_silver])
    clf.knowledge = clf.knowledge.with_calibrator(fit_calibrator(method, zk, (prep.three_y[cal_silver] == ZERO)))
    extra = None
    if config.gate_rows == "cal+oof":
        zk_oof, y3 = knowledge_oof(prep, config)
        tr = np.flatnonzero(prep.mask("train", silver3=True))[: len(y3)]
        extra = GateRows(clf.hop.logits(prep.embeddings[tr], prep.features[tr]), zk_oof, prep.comparison[tr], y3)
    tau, zero_logit, trace = fit_gate(clf, prep, config.max_downward, extra)
    info.update({"tau": tau, "zero_logit": zero_logit, "gate_rows": config.gate_rows,
                 "knowledge_params": {k: v.tolist() for k, v in clf.knowledge.calibrator.params().items()
                                      if v.size <= 4}})
    clf.meta["calibration"] = info
    clf.meta["gate_trace"] = [t for t in trace if t["tau"] in (0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.01) or t["tau"] == tau]
    return info


def train_hop_only(prep: Prepared, config: TrainConfig, exclude_dataset: str | None = None) -> ComplexityClassifier:
    """A hop-head classifier trained and calibrated without one data set (leave-one-data-set-out)."""
    rows = prep.mask("train", exclude_dataset=exclude_dataset)
    clf = ComplexityClassifier(fit_hop_head(prep, rows, config), None, NEVER_LOGIT)
    mix = calibration_mix(prep, prep.mask("cal", exclude_dataset=exclude_dataset),
                          config.calibration_rows_per_dataset, config.seed)
    calibrate_hop(clf, prep, mix, config.calibration)
    return clf


def train(data: LabelledData, prep: Prepared, config: TrainConfig, model_id: str,
          generator: str | None = None) -> ComplexityClassifier:
    """The hop head on every train row; the knowledge head only from silver rows (labels of `generator`)."""
    hop = fit_hop_head(prep, prep.mask("train"), config)
    silver = prep.mask("train", silver3=True)
    knowledge = None
    if silver.any() and len(set(prep.three_y[silver].tolist())) > 1:
        knowledge = fit_knowledge_head(prep, silver, config)
    meta: dict[str, Any] = {
        "embedding_model": model_id,
        "training_data": {"sha256": data.sha256, "rows": len(data.rows), "held_out_questions": data.held_out,
                          "datasets": data.datasets, "counts": data.counts()},
        "train_config": asdict(config),
        "hop_target": "the data sets' hop structure (silver labels never override it)",
    }
    if knowledge is not None:
        meta["knowledge"] = {"generator": generator or "unknown", "silver_files": list(data.silver_files),
                             "rows": int(silver.sum())}
    clf = ComplexityClassifier(hop, knowledge, NEVER_LOGIT, meta=meta)
    calibrate(clf, prep, config)
    return clf
