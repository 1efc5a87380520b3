"""The classifier: prediction contract, artifact round-trip, the shipped artifact."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from amsrag.classify import Classifier, ComplexityClassifier, ComplexityPrediction
from amsrag.classify.calibration import TemperatureCalibrator
from amsrag.classify.features import N_FEATURES, features_batch
from amsrag.classify.model import ARTIFACT_JSON, ARTIFACT_NPZ, Head
from amsrag.classify.train import fit_head
from amsrag.errors import InputError
from amsrag.types import COMPLEXITIES

QUESTIONS = [
    "Who wrote Hamlet?",
    "When was the university that the author of The Hobbit attended founded?",
    "Which magazine was started first, Arthur's Magazine or First for Women?",
    "what is the population of canada",
]


def _tiny_classifier(seed: int = 0) -> ComplexityClassifier:
    rng = np.random.default_rng(seed)
    e = rng.normal(size=(200, 384)).astype(np.float32)
    e /= np.linalg.norm(e, axis=1, keepdims=True)
    f = rng.normal(size=(200, N_FEATURES)).astype(np.float32)
    y_hop = (e[:, 0] + 0.3 * f[:, 0] > 0).astype(int)
    y_zero = (e[:, 1] > 0.05).astype(int)
    hop = fit_head(e, f, y_hop, True, 1.0, 13).with_calibrator(TemperatureCalibrator(1.7))
    knowledge = fit_head(e, f, y_zero, False, 1.0, 13).with_calibrator(TemperatureCalibrator(0.8))
    return ComplexityClassifier(hop, knowledge, zero_logit=0.4, meta={"note": "tiny"})


def _vectors(n: int, seed: int = 1) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=(n, 384)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_prediction_contract() -> None:
    clf = _tiny_classifier()
    preds = clf.predict_batch(QUESTIONS, _vectors(len(QUESTIONS)))
    for p in preds:
        assert isinstance(p, ComplexityPrediction)
        assert set(p.probs) == set(COMPLEXITIES)
        assert sum(p.probs.values()) == pytest.approx(1.0)
        assert p.alpha == pytest.approx(max(p.probs.values())) and p.probs[p.label] == p.alpha
    assert isinstance(clf, Classifier)


def test_calibration_does_not_change_labels() -> None:
    clf = _tiny_classifier()
    e, f = _vectors(500, 3), features_batch(QUESTIONS * 125)
    label_cal, probs_cal = clf.probabilities(e, f, calibrated=True)
    label_raw, probs_raw = clf.probabilities(e, f, calibrated=False)
    assert np.array_equal(label_cal, label_raw)
    assert np.array_equal(probs_cal.argmax(axis=1), label_cal)
    assert not np.allclose(probs_cal, probs_raw)


def test_zero_hop_only_through_the_gate() -> None:
    clf = _tiny_classifier()
    e, f = _vectors(500, 4), features_batch(QUESTIONS * 125)
    zk = clf.knowledge.logits(e, f)
    label, probs = clf.probabilities(e, f)
    assert np.all((label == 0) == (zk >= clf.zero_logit))
    assert np.all(probs[label != 0, 0] == 0.0)


def test_artifact_round_trip(tmp_path: Path) -> None:
    clf = _tiny_classifier()
    clf.save(tmp_path / "a")
    again = ComplexityClassifier.load(tmp_path / "a")
    v = _vectors(len(QUESTIONS))
    before, after = clf.predict_batch(QUESTIONS, v), again.predict_batch(QUESTIONS, v)
    assert [p.to_dict() for p in before] == [p.to_dict() for p in after]
    assert again.meta["note"] == "tiny"
    clf.save(tmp_path / "b")  # byte-reproducible
    for name in (ARTIFACT_JSON, ARTIFACT_NPZ):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_corrupt_or_foreign_artifact_is_refused(tmp_path: Path) -> None:
    clf = _tiny_classifier()
    clf.save(tmp_path)
    blob = bytearray((tmp_path / ARTIFACT_NPZ).read_bytes())
    blob[-30] ^= 0xFF
    (tmp_path / ARTIFACT_NPZ).write_bytes(bytes(blob))
    with pytest.raises(InputError, match="sha256"):
        ComplexityClassifier.load(tmp_path)
    with pytest.raises(InputError, match="not a classifier artifact"):
        ComplexityClassifier.load(tmp_path / "missing")


def test_bad_inputs() -> None:
    clf = _tiny_classifier()
    for q in ("", "   \n"):
        with pytest.raises(InputError, match="empty question"):
            clf.predict(q, _vectors(1)[0])
    with pytest.raises(InputError, match="shape"):
        clf.predict_batch(QUESTIONS, _vectors(2))
    assert clf.predict_batch([]) == []


def test_head_without_features_ignores_them() -> None:
    h = _tiny_classifier().knowledge
    assert isinstance(h, Head) and not h.use_features and h.coef.shape == (384,)


@pytest.fixture(scope="module")
def shipped() -> ComplexityClassifier:
    return ComplexityClassifier.load()


def test_shipped_artifact_predicts_sensible_labels(shipped: ComplexityClassifier) -> None:
    preds = shipped.predict_batch([
        "When was the university that the author of The Hobbit attended founded?",
        "What is the name of the record label of the band whose lead singer wrote Born to Run?",
        "who sang the song hotel california",
        "What is John Mayne's occupation?",
    ])
    assert [p.label for p in preds[:2]] == ["multi_hop", "multi_hop"]
    assert all(p.label != "multi_hop" for p in preds[2:])
    assert all(0.0 < p.alpha <= 1.0 for p in preds)


def test_shared_vector_gives_the_same_prediction(shipped: ComplexityClassifier) -> None:
    q = "Who directed the film in which Tom Hanks played a stranded FedEx employee?"
    vector = shipped.encoder.encode_query(q)
    a, b = shipped.predict(q, vector), shipped.predict(q)
    assert a.label == b.label and a.alpha == pytest.approx(b.alpha)
    assert a.probs == pytest.approx(b.probs)
