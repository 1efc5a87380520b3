"""Metrics of the classifier and its baselines: the paper's Table 3 columns, error direction, per data set."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from amsrag.calibration import classification_metrics
from amsrag.classify.model import ComplexityClassifier
from amsrag.learn.classifier.train import CONFIDENT, MULTI, Prepared, confident_downward
from amsrag.types import COMPLEXITIES

HOP_LABELS = ("one_hop", "multi_hop")


def error_direction(y: np.ndarray, pred: np.ndarray) -> dict[str, float]:
    """Upward errors (a costlier route than needed) and downward errors (cheaper: evidence lost), as rates."""
    y, pred = np.asarray(y), np.asarray(pred)
    n = max(len(y), 1)
    return {"upward": float(np.sum(pred > y) / n), "downward": float(np.sum(pred < y) / n),
            "upward_n": int(np.sum(pred > y)), "downward_n": int(np.sum(pred < y))}


def evaluate_outputs(prep: Prepared, mask: np.ndarray, label: np.ndarray, probs: np.ndarray,
                     hop_pred: np.ndarray, hop_conf: np.ndarray) -> dict[str, Any]:
    """All report sections for one system's outputs on the rows of `mask` (outputs are row-aligned with mask)."""
    rows = [r for r, m in zip(prep.rows, mask, strict=True) if m]
    y3, yh = prep.three_y[mask], prep.hop_y[mask]
    alpha = probs.max(axis=1)
    silver = y3 >= 0
    dataset_rows = np.array([r.source == "dataset" for r in rows])
    out: dict[str, Any] = {
        "silver_three_way": classification_metrics(y3[silver], label[silver], alpha[silver], COMPLEXITIES),
        "hop_dataset": classification_metrics(yh[dataset_rows], hop_pred[dataset_rows], hop_conf[dataset_rows],
                                              HOP_LABELS),
        "hop_all": classification_metrics(yh, hop_pred, hop_conf, HOP_LABELS),
    }
    out["silver_three_way"]["direction"] = error_direction(y3[silver], label[silver])
    # dataset rows: gold one_hop (1) / multi_hop (2) against the three-way label (zero_hop counts as cheaper)
    out["dataset_direction"] = error_direction(yh[dataset_rows] + 1, label[dataset_rows])
    out["confident_downward"] = {
        "all_multi_hop": confident_downward(label, alpha, yh),
        "dataset_multi_hop": confident_downward(label[dataset_rows], alpha[dataset_rows], yh[dataset_rows]),
        "silver_C": confident_downward(label[silver], alpha[silver], (y3[silver] == MULTI).astype(int)),
        "n_multi_hop": int(np.sum(yh == 1)),
    }
    per: dict[str, Any] = {}
    for ds in sorted({r.dataset for r in rows}):
        m = np.array([r.dataset == ds for r in rows])
        s = m & silver
        per[ds] = {
            "n": int(m.sum()),
            "hop_accuracy": float(np.mean(hop_pred[m] == yh[m])),
            "hop_accuracy_dataset_rows": (float(np.mean(hop_pred[m & dataset_rows] == yh[m & dataset_rows]))
                                          if (m & dataset_rows).any() else None),
            "predicted": dict(Counter(COMPLEXITIES[i] for i in label[m])),
            "silver_n": int(s.sum()),
            "silver_accuracy": float(np.mean(label[s] == y3[s])) if s.any() else None,
            "confident_downward": confident_downward(label[m], alpha[m], yh[m]),
            "n_multi_hop": int(np.sum(yh[m] == 1)),
        }
    out["per_dataset"] = per
    out["label_mix"] = dict(Counter(COMPLEXITIES[i] for i in label))
    out["share_alpha_ge_0.90"] = float(np.mean(alpha >= CONFIDENT))
    return out


def model_outputs(clf: ComplexityClassifier, prep: Prepared, mask: np.ndarray, calibrated: bool = True):
    """(label, probs, hop_pred, hop_conf) of the model on the rows of `mask`."""
    e, f = prep.embeddings[mask], prep.features[mask]
    label, probs = clf.probabilities(e, f, calibrated=calibrated)
    zh = clf.hop.logits(e, f)
    p_multi = clf.hop.calibrator.prob1(zh) if calibrated else 1.0 / (1.0 + np.exp(-zh))
    hop_pred = (zh >= 0).astype(int)
    return label, probs, hop_pred, np.where(hop_pred == 1, p_multi, 1.0 - p_multi)


def evaluate_classifier(clf: ComplexityClassifier, prep: Prepared, split: str = "test") -> dict[str, Any]:
    """The model, uncalibrated and calibrated, on one split."""
    mask = prep.mask(split)  # type: ignore[arg-type]
    return {
        "split": split,
        "uncalibrated": evaluate_outputs(prep, mask, *model_outputs(clf, prep, mask, calibrated=False)),
        "calibrated": evaluate_outputs(prep, mask, *model_outputs(clf, prep, mask, calibrated=True)),
    }


def summary(result: dict[str, Any]) -> dict[str, Any]:
    """The headline numbers of `evaluate_classifier` (what `classifier evaluate --json` prints)."""
    cal, unc = result["calibrated"], result["uncalibrated"]
    s3, hop = cal["silver_three_way"], cal["hop_dataset"]
    return {
        "split": result["split"],
        "silver_three_way": {"n": s3["n"], "accuracy": s3["accuracy"], "macro_f1": s3["macro_f1"],
                             "ece_before": unc["silver_three_way"]["ece"], "ece_after": s3["ece"], "raa": s3["raa"]},
        "hop_dataset": {"n": hop["n"], "accuracy": hop["accuracy"], "macro_f1": hop["macro_f1"],
                        "ece_before": unc["hop_dataset"]["ece"], "ece_after": hop["ece"], "raa": hop["raa"]},
        "confident_downward": cal["confident_downward"],
    }
