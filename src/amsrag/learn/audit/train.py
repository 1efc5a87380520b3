"""Training of the citation-support audit: a calibrated classifier per head (`full`: reader + text features,
`text`: text features only), the flag threshold chosen on the calibration split, held-out metrics (by
question: the test split; and leave-one-dataset-out). Deterministic for a seed."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from amsrag.artifacts import file_sha256
from amsrag.audit.features import FEATURE_NAMES, TEXT_FEATURES
from amsrag.audit.model import HEADS, SupportHead, SupportModel, columns
from amsrag.correct.evaluator import EvalCalibration, ScoreCalibrator
from amsrag.ingest.dataset_facts import HOTPOT_FILES, MUSIQUE_FILES, NQ_FILE, READER_FILES, WIKI_FILE
from amsrag.learn.audit.data import AuditDataConfig, Rows
from amsrag.learn.evaluator.train import binary_metrics

TRAIN_COMMAND = ("OMP_NUM_THREADS=1 amsrag train audit train --data ../shared/data --out src/amsrag/data/audit "
                 "--seed 13 --model gbdt --calibration platt")
DOCS_OPTION = "--docs /work/docs_corpora"  # the documentation sets of learn.audit.doc_rows (docs_qa/README.md)


# With `monotone`, support never falls as these rise. Off in the shipped model: the wrong answers of the rows
# are the reader's own favourites, so a present answer the reader reads with a tiny probability was mostly a
# gold one, and the constraint then costs the reader features most of their use (docs/benchmarks/audit.md).
MONOTONE = frozenset({"r_prob", "r_logit", "r_rel", "r_found", "ans_exact", "ans_tok_cov", "type_ok", "ent_cov",
                      "ent_min", "term_cov", "sent_cov", "sent_ent"})


@dataclass(frozen=True, slots=True)
class AuditTrainConfig:
    seed: int = 13
    per_dataset: int = 2000
    model: str = "gbdt"  # gbdt | logistic
    calibration: EvalCalibration = "platt"
    trees: int = 150
    learning_rate: float = 0.05
    max_leaf_nodes: int = 15
    min_samples_leaf: int = 20
    c: float = 1.0
    false_flags: float = 0.2  # the flag threshold: at most this share of the cal split's supported answers flagged
    monotone: bool = False  # constrain the trees to support non-decreasing in `MONOTONE`
    doc_sets: tuple[str, ...] = ()  # documentation sets mixed into the train / cal splits (learn.audit.doc_rows)

    def data_config(self) -> AuditDataConfig:
        return AuditDataConfig(seed=self.seed, per_dataset=self.per_dataset, doc_sets=tuple(self.doc_sets))

    def rebuild_command(self) -> str:
        return f"{TRAIN_COMMAND} {DOCS_OPTION}" if self.doc_sets else TRAIN_COMMAND


def fit_model(x: np.ndarray, y: np.ndarray, config: AuditTrainConfig) -> Any:
    from amsrag.correct.evaluator import RelevanceModel, TreeEnsemble
    from amsrag.learn.common import standardise

    if config.model == "gbdt":
        from sklearn.ensemble import HistGradientBoostingClassifier

        names = FEATURE_NAMES[-x.shape[1]:]  # the text head reads the trailing text features
        gb = HistGradientBoostingClassifier(max_iter=config.trees, learning_rate=config.learning_rate,
                                            max_leaf_nodes=config.max_leaf_nodes,
                                            min_samples_leaf=config.min_samples_leaf, early_stopping=False,
                                            monotonic_cst=[int(config.monotone and n in MONOTONE) for n in names],
                                            random_state=config.seed)
        gb.fit(x, y)
        tree = TreeEnsemble.from_sklearn(gb)
        if not np.allclose(tree.logits(x[:256]), gb.decision_function(x[:256]), atol=1e-8):
            raise RuntimeError("tree export does not reproduce scikit-learn's decision function")
        return tree
    if config.model != "logistic":
        raise ValueError(f"unknown model {config.model!r}; use gbdt or logistic")
    from sklearn.linear_model import LogisticRegression

    mean, scale = standardise(x)
    lr = LogisticRegression(C=config.c, max_iter=5000, random_state=config.seed).fit((x - mean) / scale, y)
    return RelevanceModel(lr.coef_[0].astype(np.float64), float(lr.intercept_[0]), mean, scale)


def flag_threshold(p: np.ndarray, y: np.ndarray, false_flags: float) -> float:
    """The highest threshold t (grid 0.01) at which at most `false_flags` of the supported answers have
    support < t: flag as much as that allows. A rate over the supported answers alone, so the threshold
    does not depend on the share of unsupported rows the training mix happens to hold."""
    pos = p[y == 1]
    if not len(pos):
        return 0.0
    for t in np.round(np.arange(0.99, 0.0, -0.01), 2):
        if (pos < t).mean() <= false_flags:
            return float(t)
    return 0.0


def fit_head(x_tr: np.ndarray, y_tr: np.ndarray, x_cal: np.ndarray, y_cal: np.ndarray,
             config: AuditTrainConfig) -> SupportHead:
    model = fit_model(x_tr, y_tr, config)
    calibrator = ScoreCalibrator.fit(config.calibration, model.logits(x_cal), y_cal)
    p_cal = np.clip(calibrator(model.logits(x_cal)), 0, 1)
    return SupportHead(model, calibrator, flag_threshold(p_cal, y_cal, config.false_flags))


def flag_rates(p: np.ndarray, y: np.ndarray, threshold: float) -> dict[str, Any]:
    f = p < threshold
    return {"threshold": threshold, "flagged": round(float(f.mean()), 4) if len(f) else None,
            "precision": round(float((1 - y[f]).mean()), 4) if f.any() else None,
            "recall_unsupported": round(float(f[y == 0].mean()), 4) if (y == 0).any() else None,
            "supported_flagged": round(float(f[y == 1].mean()), 4) if (y == 1).any() else None}


def _short(m: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in m.items() if k != "reliability"}


def evaluate_head(head: SupportHead, rows: Rows, mask: np.ndarray, name: str) -> dict[str, Any]:
    x = rows.x[mask][:, columns(name)]
    y = rows.y[mask]
    p = head.support(x)
    z = head.model.logits(x)
    by_ds = {d: _short(binary_metrics(p[rows.dataset[mask] == d], y[rows.dataset[mask] == d]))
             for d in sorted(set(rows.dataset[mask].tolist()))}
    by_kind = {k: {"n": int((rows.kind[mask] == k).sum()),
                   "mean_support": round(float(p[rows.kind[mask] == k].mean()), 4),
                   "flagged": round(float((p[rows.kind[mask] == k] < head.threshold).mean()), 4)}
               for k in sorted(set(rows.kind[mask].tolist()))}
    # the hard part: answers that occur in the cited text (a wrong span of the gold passage, a distractor
    # that names the answer), without the rows an absent answer string gives away
    present = rows.x[mask][:, FEATURE_NAMES.index("ans_exact")] == 1
    return {"metrics": binary_metrics(p, y), "uncalibrated": _short(binary_metrics(1 / (1 + np.exp(-z)), y)),
            "answer_present": _short(binary_metrics(p[present], y[present])),
            "by_dataset": by_ds, "by_kind": by_kind, "flag": flag_rates(p, y, head.threshold)}


def data_files(data_dir: Path) -> dict[str, str]:
    files = sorted({*HOTPOT_FILES, *MUSIQUE_FILES, NQ_FILE, WIKI_FILE, *(f for fs in READER_FILES.values()
                                                                          for f in fs)})
    return {f: file_sha256(Path(data_dir) / f) for f in files if (Path(data_dir) / f).is_file()}


def lodo(rows: Rows, config: AuditTrainConfig, head: str = "full") -> dict[str, Any]:
    """Leave one data set out: train on the others' train split, calibrate (and choose the threshold) on
    their cal split, test on every row of the left-out data set."""
    out: dict[str, Any] = {}
    cols = columns(head)
    for d in sorted(set(rows.dataset.tolist())):
        tr = (rows.dataset != d) & (rows.split == "train")
        cal = (rows.dataset != d) & (rows.split == "cal")
        te = rows.dataset == d
        h = fit_head(rows.x[tr][:, cols], rows.y[tr], rows.x[cal][:, cols], rows.y[cal], config)
        p = h.support(rows.x[te][:, cols])
        out[d] = {**_short(binary_metrics(p, rows.y[te])), "flag": flag_rates(p, rows.y[te], h.threshold)}
    return out


def train(rows: Rows, config: AuditTrainConfig, data_dir: Path) -> tuple[SupportModel, dict[str, Any]]:
    tr, cal, te = (rows.split == s for s in ("train", "cal", "test"))
    heads: dict[str, SupportHead] = {}
    report: dict[str, Any] = {
        "rows": {s: int((rows.split == s).sum()) for s in ("train", "cal", "test")},
        "questions": {s: len(set(rows.question[rows.split == s].tolist())) for s in ("train", "cal", "test")},
        "positives": {s: int(rows.y[rows.split == s].sum()) for s in ("train", "cal", "test")},
        "data": rows.stats,
        "test_sources": {s: int((rows.source[te] == s).sum()) for s in sorted(set(rows.source.tolist()))},
    }
    for name in HEADS:
        cols = columns(name)
        heads[name] = fit_head(rows.x[tr][:, cols], rows.y[tr], rows.x[cal][:, cols], rows.y[cal], config)
        report[name] = {"test": evaluate_head(heads[name], rows, te, name),
                        "cal": _short(evaluate_head(heads[name], rows, cal, name)["metrics"])}
    model = SupportModel(heads)
    model.meta = {
        "training_data": {"sha256": rows.sha256, **report["rows"], "questions": report["questions"],
                          "positives": report["positives"], **rows.stats},
        "data_files": data_files(data_dir),
        "train_config": asdict(config),
        "text_features": list(TEXT_FEATURES),
        "metrics": {f"{name}_test_{k}": report[name]["test"]["metrics"][k] for name in HEADS
                    for k in ("roc_auc", "ece")},
        "flag": {name: report[name]["test"]["flag"] for name in HEADS},
        "rebuild": config.rebuild_command(),
        "note": "held out by question (a seeded hash of the normalised question); questions the span reader "
                "trained on are left out of every split; documentation rows (training_data.doc_sets) are in the "
                "train or cal split of their whole set, never in test",
    }
    report["n_features"] = len(FEATURE_NAMES)
    return model, report
