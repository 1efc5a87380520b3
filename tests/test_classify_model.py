"""The classifier: prediction contract, artifact round-trip, the shipped artifact."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from amsrag.calibration import TemperatureCalibrator
from amsrag.classify import Classifier, ComplexityClassifier, ComplexityPrediction
from amsrag.classify.features import N_FEATURES, features_batch
from amsrag.classify.model import ARTIFACT_JSON, ARTIFACT_NPZ, Head
from amsrag.errors import InputError
from amsrag.learn.classifier.train import fit_head
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


def test_features_only_head_round_trip(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    e = rng.normal(size=(120, 384)).astype(np.float32)
    f = rng.normal(size=(120, N_FEATURES)).astype(np.float32)
    y = (f[:, 2] > 0).astype(int)
    head = fit_head(e, f, y, True, 1.0, 13, use_embedding=False)
    assert head.coef.shape == (N_FEATURES,) and not head.use_embedding
    # the embedding cannot move a features-only head
    assert np.allclose(head.logits(e, f), head.logits(np.zeros_like(e), f))
    assert np.mean((head.logits(e, f) >= 0) == y) > 0.9
    clf = _tiny_classifier()
    clf.knowledge = head.with_calibrator(TemperatureCalibrator(1.3))
    assert not clf.knowledge.use_embedding
    clf.save(tmp_path)
    again = ComplexityClassifier.load(tmp_path)
    assert not again.knowledge.use_embedding and again.hop.use_embedding
    v = _vectors(len(QUESTIONS))
    before, after = clf.predict_batch(QUESTIONS, v), again.predict_batch(QUESTIONS, v)
    assert [p.to_dict() for p in before] == [p.to_dict() for p in after]
    with pytest.raises(ValueError, match="embedding, the features or both"):
        fit_head(e, f, y, False, 1.0, 13, use_embedding=False)


def test_older_artifact_versions_are_refused(tmp_path: Path) -> None:
    clf = _tiny_classifier()
    clf.save(tmp_path)
    spec = json.loads((tmp_path / ARTIFACT_JSON).read_text())
    for version in (2, 99):
        spec["artifact_version"] = version
        (tmp_path / ARTIFACT_JSON).write_text(json.dumps(spec))
        with pytest.raises(InputError, match=f"artifact version {version}.*retrain"):
            ComplexityClassifier.load(tmp_path)


def _hop_only() -> ComplexityClassifier:
    tiny = _tiny_classifier()
    return ComplexityClassifier(tiny.hop, None, 1e9, meta={"note": "hop only"})


def test_without_a_knowledge_head_zero_hop_has_no_mass(tmp_path: Path) -> None:
    clf = _hop_only()
    preds = clf.predict_batch(QUESTIONS, _vectors(len(QUESTIONS)))
    assert all(p.label in ("one_hop", "multi_hop") and p.probs["zero_hop"] == 0.0 for p in preds)
    assert clf.knows_generator is None
    clf.save(tmp_path)
    again = ComplexityClassifier.load(tmp_path)
    assert again.knowledge is None
    assert [p.to_dict() for p in again.predict_batch(QUESTIONS, _vectors(len(QUESTIONS)))] == [
        p.to_dict() for p in preds]


def test_two_entity_comparisons_never_pass_the_gate() -> None:
    tiny = _tiny_classifier()
    always = ComplexityClassifier(tiny.hop, tiny.knowledge, zero_logit=-1e9)  # the gate open for everything
    questions = ["Which magazine was started first, Arthur's Magazine or First for Women?",
                 "Were Scott Derrickson and Ed Wood of the same nationality?", "Who wrote Hamlet?"]
    labels = [p.label for p in always.predict_batch(questions, _vectors(3))]
    assert labels[:2] != ["zero_hop", "zero_hop"] and "zero_hop" not in labels[:2] and labels[2] == "zero_hop"


def test_hop_temperature_override_moves_confidence_not_labels() -> None:
    clf = _hop_only()
    v = _vectors(len(QUESTIONS))
    soft = clf.with_hop_temperature(50.0)
    a, b = clf.predict_batch(QUESTIONS, v), soft.predict_batch(QUESTIONS, v)
    assert [p.label for p in a] == [p.label for p in b]
    assert all(q.alpha < 0.6 for q in b) and any(p.alpha > q.alpha for p, q in zip(a, b, strict=True))
    with pytest.raises(InputError, match="positive"):
        clf.with_hop_temperature(0.0)


def test_library_vote_blends_and_can_decide() -> None:
    from amsrag.classify.library import LibrarySettings, QueryLibrary

    clf = _hop_only()
    clf.library_settings = LibrarySettings(threshold=0.9, k=5, strength=0.1)
    v = _vectors(len(QUESTIONS))
    own = clf.predict_batch(QUESTIONS, v)
    flipped = ["one_hop" if p.label == "multi_hop" else "multi_hop" for p in own]
    library = QueryLibrary.empty()
    library.add([f"stored {i}" for i in range(len(QUESTIONS))], flipped, v, "test")
    voted = clf.predict_batch(QUESTIONS, v, library=library)
    for p, q, want in zip(own, voted, flipped, strict=True):
        assert q.library is not None and q.library.n_close == 1
        assert q.label == want and q.decided_by == "library" and q.to_dict()["library"]["neighbours"]
        assert sum(q.probs.values()) == pytest.approx(1.0) and q.alpha == q.probs[q.label]
        assert p.decided_by == "classifier" and p.library is None
    far = clf.predict_batch(QUESTIONS, _vectors(len(QUESTIONS), seed=9), library=library)
    assert all(p.library is None and p.decided_by == "classifier" for p in far)


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
    # the default generator is extractive: the shipped artifact has no knowledge head, hence no zero_hop
    assert shipped.knowledge is None and all(p.probs["zero_hop"] == 0.0 for p in preds)


def test_shared_vector_gives_the_same_prediction(shipped: ComplexityClassifier) -> None:
    q = "Who directed the film in which Tom Hanks played a stranded FedEx employee?"
    vector = shipped.encoder.encode_query(q)
    a, b = shipped.predict(q, vector), shipped.predict(q)
    assert a.label == b.label and a.alpha == pytest.approx(b.alpha)
    assert a.probs == pytest.approx(b.probs)


def _synthetic_prepared(seed: int = 0):
    """Train/cal rows with a hop signal in embedding dim 0 and a zero_hop signal in feature 2."""
    from amsrag.ingest.datasets import LabelledQuestion
    from amsrag.learn.classifier.data import LabelledData
    from amsrag.learn.classifier.train import Prepared

    rng = np.random.default_rng(seed)
    rows, emb, feats = [], [], []
    for i in range(900):
        split = "train" if i < 700 else "cal"
        silver = i % 3 == 0
        e = rng.normal(size=384)
        f = rng.normal(size=N_FEATURES)
        hop = "multi_hop" if e[0] > 0 else "one_hop"
        three = None
        if silver:
            three = "zero_hop" if f[2] + 0.7 * rng.normal() > 0.3 else hop
        rows.append(LabelledQuestion(f"q{i}", f"question {i}?", "hotpotqa", "silver3" if silver else "dataset",
                                     hop, three, split))  # type: ignore[arg-type]
        emb.append(e / np.linalg.norm(e))
        feats.append(f)
    prep = Prepared(rows, np.asarray(emb, np.float32), np.asarray(feats, np.float32), np.zeros(len(rows), bool))
    return LabelledData(rows, "synthetic", "-"), prep


@pytest.mark.slow
@pytest.mark.parametrize("gate_rows", ["cal", "cal+oof"])
def test_gate_maximises_silver_accuracy_on_its_rows(gate_rows: str) -> None:
    from amsrag.learn.classifier.train import TrainConfig, train

    data, prep = _synthetic_prepared()
    # zero_hop here is independent of the hop, so any open gate sends some multi_hop rows cheaper: allow it
    config = TrainConfig(knowledge_c=1.0, gate_rows=gate_rows, max_downward=0.2)  # type: ignore[arg-type]
    clf = train(data, prep, config, "synthetic")
    info, trace = clf.meta["calibration"], clf.meta["gate_trace"]
    assert info["gate_rows"] == gate_rows and not clf.knowledge.use_embedding
    chosen = next(t for t in trace if t["tau"] == info["tau"])
    allowed = [t for t in trace if t["confident_downward"] <= config.max_downward]
    assert chosen["silver_accuracy"] == max(t["silver_accuracy"] for t in allowed)
    if gate_rows == "cal":
        assert all(t["silver_accuracy"] == t["cal_silver_accuracy"] for t in trace)
    else:  # the out-of-fold train rows count: ~230 silver train rows against ~67 cal rows
        assert any(t["silver_accuracy"] != t["cal_silver_accuracy"] for t in trace)
    # the zero_hop signal is learnable here, so the gate opens and beats never answering zero_hop
    never = next(t for t in trace if t["tau"] == 1.01)
    assert chosen["silver_accuracy"] > never["silver_accuracy"] and 0.5 <= info["tau"] <= 0.99
    again = train(data, prep, config, "synthetic")
    assert again.zero_logit == clf.zero_logit
