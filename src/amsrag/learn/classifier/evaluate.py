"""Metrics of the classifier: hop accuracy, ECE and confident-downward overall and per data set, error
direction, and the three-way metrics on rows a generator labelled."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from amsrag.calibration import classification_metrics, ece, reliability_bins
from amsrag.classify.model import ComplexityClassifier
from amsrag.learn.classifier.train import CONFIDENT, Prepared, confident_downward
from amsrag.types import COMPLEXITIES

HOP_LABELS = ("one_hop", "multi_hop")


def error_direction(y: np.ndarray, pred: np.ndarray) -> dict[str, float]:
    """Upward errors (a costlier route than needed) and downward errors (cheaper: evidence lost), as rates."""
    y, pred = np.asarray(y), np.asarray(pred)
    n = max(len(y), 1)
    return {"upward": float(np.sum(pred > y) / n), "downward": float(np.sum(pred < y) / n),
            "upward_n": int(np.sum(pred > y)), "downward_n": int(np.sum(pred < y))}


def hop_metrics(yh: np.ndarray, hop_pred: np.ndarray, hop_conf: np.ndarray, label: np.ndarray,
                alpha: np.ndarray) -> dict[str, Any]:
    """Hop accuracy, ECE, reliability bins and confident-downward of one group of rows."""
    correct = hop_pred == yh
    bins = reliability_bins(hop_conf, correct)
    return {"n": len(yh), "accuracy": float(correct.mean()) if len(yh) else 0.0,
            "ece": ece(hop_conf, correct), "mean_confidence": float(hop_conf.mean()) if len(yh) else 0.0,
            "confident_downward": confident_downward(label, alpha, yh), "n_multi_hop": int(np.sum(yh == 1)),
            "reliability": {"confidence": _finite(bins.confidence), "accuracy": _finite(bins.accuracy),
                            "count": bins.count.tolist()}}


def _finite(values: np.ndarray) -> list[float | None]:
    return [float(v) if np.isfinite(v) else None for v in values]


def evaluate_outputs(prep: Prepared, mask: np.ndarray, label: np.ndarray, probs: np.ndarray,
                     hop_pred: np.ndarray, hop_conf: np.ndarray) -> dict[str, Any]:
    """All report sections for one system's outputs on the rows of `mask` (outputs are row-aligned with mask)."""
    datasets = prep.datasets[mask]
    y3, yh = prep.three_y[mask], prep.hop_y[mask]
    alpha = probs.max(axis=1)
    out: dict[str, Any] = {
        "hop": classification_metrics(yh, hop_pred, hop_conf, HOP_LABELS),
        "hop_summary": hop_metrics(yh, hop_pred, hop_conf, label, alpha),
        # gold one_hop (1) / multi_hop (2) against the three-way label (zero_hop counts as cheaper)
        "direction": error_direction(yh + 1, label),
        "label_mix": dict(Counter(COMPLEXITIES[i] for i in label)),
        "share_alpha_ge_0.90": float(np.mean(alpha >= CONFIDENT)) if len(alpha) else 0.0,
    }
    silver = y3 >= 0
    if silver.any():
        out["silver_three_way"] = classification_metrics(y3[silver], label[silver], alpha[silver], COMPLEXITIES)
        out["silver_three_way"]["direction"] = error_direction(y3[silver], label[silver])
    out["per_dataset"] = {
        d: {**hop_metrics(yh[m], hop_pred[m], hop_conf[m], label[m], alpha[m]),
            "predicted": dict(Counter(COMPLEXITIES[i] for i in label[m]))}
        for d in sorted(set(datasets.tolist())) for m in [datasets == d]}
    return out


def model_outputs(clf: ComplexityClassifier, prep: Prepared, mask: np.ndarray, calibrated: bool = True):
    """(label, probs, hop_pred, hop_conf) of the model on the rows of `mask`."""
    e, f = prep.embeddings[mask], prep.features[mask]
    label, probs = clf.probabilities(e, f, calibrated=calibrated, comparison=prep.comparison[mask])
    zh, zk = clf.raw_logits(e, f)
    p_multi, _ = clf.head_probabilities(zh, zk, calibrated)
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
    """The headline numbers of `evaluate_classifier` (what `train classifier evaluate --json` prints)."""
    cal, unc = result["calibrated"], result["uncalibrated"]
    hop = cal["hop"]
    out: dict[str, Any] = {
        "split": result["split"],
        "hop": {"n": hop["n"], "accuracy": hop["accuracy"], "macro_f1": hop["macro_f1"],
                "ece_before": unc["hop"]["ece"], "ece_after": hop["ece"], "raa": hop["raa"]},
        "per_dataset": {d: {"n": m["n"], "accuracy": m["accuracy"], "ece": m["ece"],
                            "confident_downward": m["confident_downward"]}
                        for d, m in cal["per_dataset"].items()},
        "confident_downward": cal["hop_summary"]["confident_downward"],
        "n_multi_hop": cal["hop_summary"]["n_multi_hop"],
    }
    if "silver_three_way" in cal:
        s3 = cal["silver_three_way"]
        out["silver_three_way"] = {"n": s3["n"], "accuracy": s3["accuracy"], "macro_f1": s3["macro_f1"],
                                   "ece_before": unc["silver_three_way"]["ece"], "ece_after": s3["ece"],
                                   "raa": s3["raa"]}
    return out
