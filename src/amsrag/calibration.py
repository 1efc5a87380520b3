"""Calibration of binary head logits, and the calibration metrics (ECE, reliability bins, RAA, and the
classification metrics the classifier's trainer and the evaluation report both give).

Every calibrator here maps a head's raw logit z to p(class 1) *without moving the decision*:
p >= 0.5 exactly when z >= 0. Temperature scaling (p = sigmoid(z / T), T fitted by minimising NLL on
the calibration split) is the default; Platt and isotonic are top-label variants: they map |z|
to the confidence of the predicted class, clipped to [0.5, 1], fitted to its correctness.

A ground-floor module (numpy only; scikit-learn imported lazily by the fits): the classifier and the
retrieval evaluator use it at run time, `amsrag.learn` and `amsrag.evaluate` for fitting and metrics.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Protocol

import numpy as np

CalibrationMethod = Literal["temperature", "platt", "isotonic", "none"]
CALIBRATION_METHODS: tuple[CalibrationMethod, ...] = ("temperature", "platt", "isotonic", "none")
N_BINS = 15
_EPS = 1e-12


def sigmoid(z: np.ndarray | float) -> np.ndarray:
    z = np.asarray(z, dtype=np.float64)
    return np.exp(-np.logaddexp(0.0, -z))


def softmax(z: np.ndarray) -> np.ndarray:
    z = np.asarray(z, dtype=np.float64)
    z = z - z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


# ---------------------------------------------------------------- metrics


def bin_index(confidence: np.ndarray, n_bins: int = N_BINS) -> np.ndarray:
    """Bin b holds confidences in (b/n, (b+1)/n]; confidence 0 falls in bin 0."""
    c = np.asarray(confidence, dtype=np.float64)
    return np.clip(np.ceil(c * n_bins).astype(int) - 1, 0, n_bins - 1)


def ece(confidence: np.ndarray, correct: np.ndarray, n_bins: int = N_BINS) -> float:
    """Expected calibration error: sum_b |B_b|/N * |acc(B_b) - conf(B_b)| over equal-width bins."""
    c = np.asarray(confidence, dtype=np.float64)
    y = np.asarray(correct, dtype=np.float64)
    if c.size == 0:
        return 0.0
    idx = bin_index(c, n_bins)
    total = 0.0
    for b in range(n_bins):
        m = idx == b
        if m.any():
            total += m.sum() / c.size * abs(y[m].mean() - c[m].mean())
    return float(total)


@dataclass(frozen=True, slots=True)
class ReliabilityBins:
    lower: np.ndarray
    upper: np.ndarray
    count: np.ndarray
    accuracy: np.ndarray  # nan for empty bins
    confidence: np.ndarray


def reliability_bins(confidence: np.ndarray, correct: np.ndarray, n_bins: int = N_BINS) -> ReliabilityBins:
    c = np.asarray(confidence, dtype=np.float64)
    y = np.asarray(correct, dtype=np.float64)
    idx = bin_index(c, n_bins)
    count = np.bincount(idx, minlength=n_bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        acc = np.bincount(idx, weights=y, minlength=n_bins) / count
        conf = np.bincount(idx, weights=c, minlength=n_bins) / count
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    return ReliabilityBins(edges[:-1], edges[1:], count, acc, conf)


def raa(accuracy: float, ece_value: float, lam: float = 1.0) -> float:
    """Reliability-adjusted accuracy (DESIGN §3)."""
    return accuracy - lam * ece_value


# ---------------------------------------------------------------- temperature fitting


def _macro_f1(y: np.ndarray, pred: np.ndarray, n_classes: int) -> float:
    f1s = []
    for c in range(n_classes):
        tp = np.sum((pred == c) & (y == c))
        fp = np.sum((pred == c) & (y != c))
        fn = np.sum((pred != c) & (y == c))
        if tp + fp + fn == 0:
            continue
        f1s.append(2 * tp / (2 * tp + fp + fn))
    return float(np.mean(f1s)) if f1s else 0.0


def classification_metrics(
    y: np.ndarray, pred: np.ndarray, confidence: np.ndarray, names: tuple[str, ...]
) -> dict[str, Any]:
    """accuracy, macro-F1, per-class recall, ECE (15 bins) on the predicted class's confidence, RAA, confusion."""
    y, pred, confidence = np.asarray(y), np.asarray(pred), np.asarray(confidence, dtype=np.float64)
    n = len(y)
    if n == 0:
        return {"n": 0}
    acc = float(np.mean(y == pred))
    e = ece(confidence, y == pred)
    k = len(names)
    confusion = np.zeros((k, k), dtype=int)
    np.add.at(confusion, (y, pred), 1)
    recall = {names[c]: (float(confusion[c, c] / confusion[c].sum()) if confusion[c].sum() else None)
              for c in range(k)}
    return {"n": n, "accuracy": acc, "macro_f1": _macro_f1(y, pred, k), "recall": recall, "ece": e,
            "raa": raa(acc, e), "mean_confidence": float(confidence.mean()), "confusion": confusion.tolist()}


def hop_view(label: np.ndarray, probs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(multi_hop? (0/1), confidence) from three-way outputs (classes 0 zero_hop, 1 one_hop, 2 multi_hop, as
    `types.COMPLEXITIES`): one vs multi renormalised without zero_hop."""
    p_multi = probs[:, 2] / np.clip(probs[:, 1] + probs[:, 2], 1e-12, None)
    pred = np.where(label == 2, 1, np.where(label == 1, 0, (p_multi >= 0.5).astype(int)))
    conf = np.where(pred == 1, p_multi, 1.0 - p_multi)
    return pred, conf


def binary_nll(logits: np.ndarray, labels: np.ndarray, temperature: float) -> float:
    z = np.asarray(logits, dtype=np.float64) / temperature
    y = np.asarray(labels, dtype=np.float64)
    # -[y log s(z) + (1-y) log(1-s(z))] = logaddexp(0, z) - y z
    return float(np.mean(np.logaddexp(0.0, z) - y * z))


def multiclass_nll(logits: np.ndarray, labels: np.ndarray, temperature: float) -> float:
    z = np.asarray(logits, dtype=np.float64) / temperature
    z = z - z.max(axis=1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    return float(-np.mean(logp[np.arange(len(labels)), np.asarray(labels, dtype=int)]))


def fit_temperature(logits: np.ndarray, labels: np.ndarray, bounds: tuple[float, float] = (0.05, 20.0)) -> float:
    """T minimising the NLL of softmax(z / T) (1-D logits: sigmoid) on held-out rows."""
    from scipy.optimize import minimize_scalar

    z = np.asarray(logits, dtype=np.float64)
    if z.size == 0:
        return 1.0
    nll = binary_nll if z.ndim == 1 else multiclass_nll
    res = minimize_scalar(lambda log_t: nll(z, labels, float(np.exp(log_t))),
                          bounds=(np.log(bounds[0]), np.log(bounds[1])), method="bounded",
                          options={"xatol": 1e-6})
    return float(np.exp(res.x))


# ---------------------------------------------------------------- calibrators of a binary head


class Calibrator(Protocol):
    @property
    def method(self) -> CalibrationMethod:
        """The calibration method (a read-only property: the calibrators are frozen dataclasses)."""
        ...

    def prob1(self, logits: np.ndarray) -> np.ndarray:
        """p(class 1) for raw logits; >= 0.5 exactly where the logit is >= 0."""
        ...

    def params(self) -> dict[str, np.ndarray]: ...


def _top_label(logits: np.ndarray, confidence: np.ndarray) -> np.ndarray:
    conf = np.clip(confidence, 0.5, 1.0)
    return np.where(np.asarray(logits) >= 0, conf, 1.0 - conf)


@dataclass(frozen=True, slots=True)
class TemperatureCalibrator:
    temperature: float = 1.0
    method: CalibrationMethod = "temperature"

    def prob1(self, logits: np.ndarray) -> np.ndarray:
        return sigmoid(np.asarray(logits, dtype=np.float64) / self.temperature)

    def params(self) -> dict[str, np.ndarray]:
        return {"temperature": np.array([self.temperature])}

    @classmethod
    def fit(cls, logits: np.ndarray, labels: np.ndarray) -> TemperatureCalibrator:
        return cls(fit_temperature(logits, labels))


@dataclass(frozen=True, slots=True)
class PlattCalibrator:
    """Top-label Platt: confidence = sigmoid(a |z| + b), fitted to the predicted class being right."""

    a: float
    b: float
    method: CalibrationMethod = "platt"

    def prob1(self, logits: np.ndarray) -> np.ndarray:
        z = np.asarray(logits, dtype=np.float64)
        return _top_label(z, sigmoid(self.a * np.abs(z) + self.b))

    def params(self) -> dict[str, np.ndarray]:
        return {"a": np.array([self.a]), "b": np.array([self.b])}

    @classmethod
    def fit(cls, logits: np.ndarray, labels: np.ndarray) -> PlattCalibrator:
        from sklearn.linear_model import LogisticRegression

        z = np.asarray(logits, dtype=np.float64)
        correct = ((z >= 0).astype(int) == np.asarray(labels)).astype(int)
        if correct.min() == correct.max():
            return cls(a=1.0, b=0.0)
        lr = LogisticRegression(C=1e4, random_state=0).fit(np.abs(z)[:, None], correct)
        return cls(a=max(float(lr.coef_[0, 0]), 0.0), b=float(lr.intercept_[0]))


@dataclass(frozen=True, slots=True)
class IsotonicCalibrator:
    """Top-label isotonic: a non-decreasing step map |z| -> confidence, interpolated linearly."""

    x: np.ndarray
    y: np.ndarray
    method: CalibrationMethod = "isotonic"

    def prob1(self, logits: np.ndarray) -> np.ndarray:
        z = np.asarray(logits, dtype=np.float64)
        return _top_label(z, np.interp(np.abs(z), self.x, self.y))

    def params(self) -> dict[str, np.ndarray]:
        return {"x": self.x, "y": self.y}

    @classmethod
    def fit(cls, logits: np.ndarray, labels: np.ndarray) -> IsotonicCalibrator:
        from sklearn.isotonic import IsotonicRegression

        z = np.asarray(logits, dtype=np.float64)
        correct = ((z >= 0).astype(int) == np.asarray(labels)).astype(float)
        iso = IsotonicRegression(y_min=0.5, y_max=1.0, increasing=True, out_of_bounds="clip")
        iso.fit(np.abs(z), correct)
        return cls(x=np.asarray(iso.X_thresholds_, dtype=np.float64), y=np.asarray(iso.y_thresholds_, dtype=np.float64))


@dataclass(frozen=True, slots=True)
class IdentityCalibrator:
    method: CalibrationMethod = "none"

    def prob1(self, logits: np.ndarray) -> np.ndarray:
        return sigmoid(logits)

    def params(self) -> dict[str, np.ndarray]:
        return {}


def fit_calibrator(method: CalibrationMethod, logits: np.ndarray, labels: np.ndarray) -> Calibrator:
    if method == "temperature":
        return TemperatureCalibrator.fit(logits, labels)
    if method == "platt":
        return PlattCalibrator.fit(logits, labels)
    if method == "isotonic":
        return IsotonicCalibrator.fit(logits, labels)
    return IdentityCalibrator()


def calibrator_from_params(method: str, params: dict[str, np.ndarray]) -> Calibrator:
    if method == "temperature":
        return TemperatureCalibrator(float(params["temperature"][0]))
    if method == "platt":
        return PlattCalibrator(float(params["a"][0]), float(params["b"][0]))
    if method == "isotonic":
        return IsotonicCalibrator(np.asarray(params["x"], np.float64), np.asarray(params["y"], np.float64))
    if method == "none":
        return IdentityCalibrator()
    raise ValueError(f"unknown calibration method {method!r}")
