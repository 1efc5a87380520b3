"""Drift monitoring (issue 22 item 4): PSI, the reference, the detector, the shipped reference, /metrics."""

from __future__ import annotations

import json
import random
import shutil

import numpy as np
import pytest

from amsrag.artifacts import file_sha256
from amsrag.config import MonitorConfig, ServeConfig
from amsrag.errors import InputError
from amsrag.monitor.drift import (
    PSI_ALARM,
    REFERENCE_FILE,
    DriftDetector,
    DriftReference,
    RouteObservation,
    observation_from_entry,
    observation_from_signals,
    psi,
    reference_for_index,
    shipped_reference_path,
)
from amsrag.querylog.entry import entry_from_answer
from amsrag.querylog.sqlite import FILE
from amsrag.serve.metrics import Metrics

BAND = (0.45, 0.65)


def _sample(rng: random.Random, n: int, p_multi: float, gray: float = 0.05) -> list[RouteObservation]:
    """Answers routed multi_hop with probability `p_multi`; alpha in the gray band with probability `gray`."""
    out = []
    for _ in range(n):
        label = "multi_hop" if rng.random() < p_multi else "one_hop"
        alpha = rng.uniform(0.5, 0.65) if rng.random() < gray else 1 - rng.betavariate(1, 12) * 0.35
        out.append(RouteObservation(label, alpha))
    return out


@pytest.fixture()
def reference() -> DriftReference:
    return DriftReference.from_observations(_sample(random.Random(1), 2000, 0.05), BAND, "synthetic NQ-like")


def test_psi_is_zero_for_identical_distributions_and_grows_with_the_shift() -> None:
    assert psi([10, 20, 30], [10, 20, 30]) == pytest.approx(0.0)
    assert psi([10, 20, 30], [20, 40, 60]) == pytest.approx(0.0, abs=1e-3)  # shares, not counts
    small, big = psi([50, 50], [45, 55]), psi([50, 50], [10, 90])
    assert 0 < small < 0.05 < PSI_ALARM < big
    assert np.isfinite(psi([100, 0], [0, 100]))  # empty bins are smoothed, never infinite
    with pytest.raises(ValueError, match="aligned"):
        psi([1, 2], [1, 2, 3])


def test_reference_bins_are_deciles_and_round_trip(reference, tmp_path) -> None:
    assert len(reference.alpha_counts) == 10 and sum(reference.alpha_counts) == reference.n == 2000
    assert max(reference.alpha_counts) - min(reference.alpha_counts) <= 2  # equal-mass bins
    assert reference.route_mix["multi_hop"] == pytest.approx(0.05, abs=0.015)
    path = reference.save(tmp_path / REFERENCE_FILE)
    assert DriftReference.load(path) == reference
    path.write_text(json.dumps({**reference.to_dict(), "alpha_counts": [1, 2]}))
    with pytest.raises(InputError, match="one more count than edges"):
        DriftReference.load(path)
    path.write_text(json.dumps({"format": "something else"}))
    with pytest.raises(InputError, match="amsrag ops monitor baseline"):
        DriftReference.load(path)
    with pytest.raises(InputError, match="at least 10"):
        DriftReference.from_observations(_sample(random.Random(2), 5, 0.1), BAND, "too few")


def test_traffic_like_the_reference_does_not_alarm(reference) -> None:
    detector = DriftDetector(reference, window=200, band=BAND)
    worst = 0.0
    for obs in _sample(random.Random(7), 2000, 0.05):
        detector.observe(obs)
        s = detector.status()
        assert not s.alarm
        if s.ready:
            worst = max(worst, *s.psi.values())
    assert 0 < worst < 0.8 * PSI_ALARM  # the highest of 1,801 windows; about 0.05 on average
    assert detector.status().recommendation.startswith("no drift")


def test_multi_hop_traffic_alarms_and_says_what_to_do(reference) -> None:
    detector = DriftDetector(reference, window=200, band=BAND, index="/srv/idx")
    for obs in _sample(random.Random(3), 200, 0.05):
        detector.observe(obs)
    assert not detector.status().alarm
    switched = None
    for i, obs in enumerate(_sample(random.Random(4), 200, 0.95), 1):
        detector.observe(obs)
        if detector.status().alarm:
            switched = i
            break
    assert switched is not None and switched < 60
    s = detector.status()
    assert "route" in s.alarmed_by and s.route_mix["multi_hop"] > s.reference_route_mix["multi_hop"]
    assert "amsrag train classifier calibrate --qa LABELLED.jsonl --index /srv/idx" in s.recommendation
    assert "towards multi_hop" in s.recommendation


def test_a_swelling_gray_zone_alarms_on_its_own(reference) -> None:
    detector = DriftDetector(reference, window=200, band=BAND)
    for obs in _sample(random.Random(5), 200, 0.05, gray=0.4):
        detector.observe(obs)
    s = detector.status()
    assert s.alarm and "gray_zone" in s.alarmed_by and s.gray_share > 0.3
    assert "gray zone swelled" in s.recommendation


def test_no_verdict_before_the_window_is_full_and_old_answers_leave_it(reference) -> None:
    detector = DriftDetector(reference, window=50, band=BAND)
    for obs in _sample(random.Random(6), 49, 0.95):
        detector.observe(obs)
    s = detector.status()
    assert not s.ready and not s.alarm and s.psi["route"] > PSI_ALARM and "no verdict" in s.recommendation
    detector.observe(RouteObservation("multi_hop", 0.99))
    assert detector.status().alarm
    for obs in _sample(random.Random(8), 50, 0.05):  # the drifted answers all leave the window
        detector.observe(obs)
    assert detector.status().answers == 50 and not detector.status().alarm
    detector.observe(None)  # an unrouted answer is not counted
    assert detector.status().answers == 50
    with pytest.raises(InputError, match="window"):
        DriftDetector(reference, window=0)


def test_observations_from_signals_and_log_rows() -> None:
    assert observation_from_signals({"route_label": "one_hop", "route_alpha": 0.9}) == RouteObservation("one_hop", 0.9)
    assert observation_from_signals({"route_label": None, "route_alpha": None}) is None
    assert observation_from_signals(None) is None
    trace = {"system": "full", "strategy": "B", "complexity": {"label": "zero_hop", "alpha": 0.8,
                                                               "route_label": "one_hop", "route_alpha": 0.7}}
    entry = entry_from_answer({"query": "q", "answer": "a", "trace": trace})
    assert observation_from_entry(entry) == RouteObservation("one_hop", 0.7)


def test_the_shipped_reference_matches_its_card() -> None:
    path = shipped_reference_path()
    card = json.loads((path.parent / "drift_reference.card.json").read_text())
    assert card["reference_sha256"] == file_sha256(path)
    ref = DriftReference.load(path)
    assert ref.n == sum(card["questions_by_dataset"].values()) == card["summary"]["n"]
    assert ref.gray_zone == (MonitorConfig().gray_zone_low, MonitorConfig().gray_zone_high)
    assert 0.3 < ref.route_mix["multi_hop"] < 0.6  # the calibration mix holds both kinds of question
    assert "python -m amsrag.learn.monitor" in card["rebuild"]


def test_an_index_without_a_reference_falls_back_to_the_shipped_one(reference, tmp_path) -> None:
    assert reference_for_index(tmp_path)[1] == shipped_reference_path()
    reference.save(tmp_path / REFERENCE_FILE)
    ref, path = reference_for_index(tmp_path)
    assert path == tmp_path / REFERENCE_FILE and ref == reference


def test_route_questions_is_what_retrieval_routes_by(built_index, slice_questions) -> None:
    from amsrag.monitor.baseline import route_questions
    from amsrag.pipeline import Engine

    engine = Engine(built_index)
    questions = [q.question for q in slice_questions[:6]]
    routed = route_questions(engine, questions)
    for q, obs in zip(questions, routed, strict=True):
        cx = engine.retrieve(q).trace.to_dict()["complexity"]
        assert (obs.label, obs.alpha) == (cx["route_label"], pytest.approx(cx["route_alpha"], abs=1e-6))


def test_metrics_export_the_drift_gauges(reference) -> None:
    metrics = Metrics()
    detector = DriftDetector(reference, window=20, band=BAND)
    for obs in _sample(random.Random(9), 20, 1.0):
        detector.observe(obs)
    metrics.observe_drift(detector.status())
    text = metrics.render().decode()
    assert 'amsrag_drift_psi{signal="route"}' in text and "amsrag_drift_alarm 1.0" in text
    assert "amsrag_drift_window_answers 20.0" in text


def test_the_service_feeds_its_detector_from_each_answer(built_index, tmp_path, slice_questions) -> None:
    from amsrag.pipeline import Engine
    from amsrag.serve.service import Service

    index_dir = tmp_path / "index"
    shutil.copytree(built_index.path, index_dir, ignore=shutil.ignore_patterns("*-shm", ".write.lock", FILE + "*"))
    DriftReference.from_observations(_sample(random.Random(1), 100, 0.05), BAND, "own").save(index_dir / REFERENCE_FILE)
    service = Service(Engine.open(index_dir), ServeConfig())
    try:
        assert service.drift is not None and service.drift.reference.source == "own"
        for q in slice_questions[:3]:
            service.ask(q.question, "full")
        text = service.metrics.render().decode()
    finally:
        service.close()
    assert "amsrag_drift_window_answers 3.0" in text and "amsrag_drift_alarm 0.0" in text  # no verdict yet
    assert 'amsrag_drift_psi{signal="alpha"}' in text


@pytest.mark.slow
def test_the_shipped_reference_is_built_from_the_classifiers_calibration_mix(shared_data) -> None:
    from amsrag.learn.monitor.reference import calibration_questions

    card = json.loads((shipped_reference_path().parent / "drift_reference.card.json").read_text())
    questions, datasets, provenance = calibration_questions(shared_data)
    assert provenance["labelled_data_sha256"] == card["settings"]["labelled_data_sha256"]
    assert {d: datasets.count(d) for d in set(datasets)} == card["questions_by_dataset"]
    assert len(set(questions)) == len(questions) == DriftReference.load(shipped_reference_path()).n
