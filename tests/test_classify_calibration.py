"""ECE, temperature fitting and calibrators against small hand-computed cases."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from amsrag.calibration import (
    IsotonicCalibrator,
    PlattCalibrator,
    TemperatureCalibrator,
    binary_nll,
    ece,
    fit_calibrator,
    fit_temperature,
    raa,
    reliability_bins,
    softmax,
)


def test_ece_hand_computed() -> None:
    # bins of width 1/15: 0.95 and 0.99 share bin 14; 0.55 is in bin 8; 0.30 in bin 4
    conf = np.array([0.95, 0.99, 0.55, 0.30])
    correct = np.array([1, 0, 1, 0])
    expected = 2 / 4 * abs(0.5 - 0.97) + 1 / 4 * abs(1 - 0.55) + 1 / 4 * abs(0 - 0.30)
    assert ece(conf, correct) == pytest.approx(expected)


def test_ece_perfect_and_worst() -> None:
    assert ece(np.ones(10), np.ones(10)) == 0.0
    assert ece(np.ones(10), np.zeros(10)) == 1.0
    assert ece(np.array([]), np.array([])) == 0.0


def test_bin_edges_are_right_closed() -> None:
    b = reliability_bins(np.array([1 / 15, 1 / 15 + 1e-9, 0.0, 1.0]), np.array([1, 1, 1, 1]))
    assert b.count[0] == 2 and b.count[1] == 1 and b.count[14] == 1


def test_raa() -> None:
    assert raa(0.8, 0.05) == pytest.approx(0.75)


def test_temperature_hand_case_binary() -> None:
    # logit 2 on four rows, three positives: the NLL optimum has sigmoid(2 / T) = 3/4, T = 2 / ln 3
    logits = np.array([2.0, 2.0, 2.0, 2.0])
    labels = np.array([1, 1, 1, 0])
    t = fit_temperature(logits, labels)
    assert t == pytest.approx(2 / math.log(3), rel=1e-4)
    assert binary_nll(logits, labels, t) <= binary_nll(logits, labels, 1.0)


def test_temperature_hand_case_multiclass() -> None:
    # logits (a, 0, 0), label 0 in 1/2 of rows, label 1 and 2 in 1/4 each: softmax(a/T)[0] = 1/2 -> a/T = ln 2
    logits = np.array([[3.0, 0.0, 0.0]] * 4)
    labels = np.array([0, 0, 1, 2])
    t = fit_temperature(logits, labels)
    assert t == pytest.approx(3 / math.log(2), rel=1e-4)
    assert softmax(logits / t)[0, 0] == pytest.approx(0.5, rel=1e-4)


def test_overconfident_logits_get_t_above_one() -> None:
    rng = np.random.default_rng(0)
    true = rng.normal(0, 1.5, 4000)
    labels = (rng.random(4000) < 1 / (1 + np.exp(-true))).astype(int)
    assert fit_temperature(true * 3, labels) == pytest.approx(3.0, rel=0.15)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(-30, 30, allow_nan=False), min_size=4, max_size=40),
    st.lists(st.integers(0, 1), min_size=4, max_size=40),
    st.sampled_from(["temperature", "platt", "isotonic"]),
)
def test_calibration_never_changes_the_decision(logits: list[float], labels: list[int], method: str) -> None:
    n = min(len(logits), len(labels))
    z, y = np.array(logits[:n]), np.array(labels[:n])
    cal = fit_calibrator(method, z, y)  # type: ignore[arg-type]
    probe = np.concatenate([z, np.linspace(-40, 40, 81)])
    p = cal.prob1(probe)
    decided = np.where(probe >= 0, p, 1.0 - p)  # the calibrated probability of the class the raw logit picks
    assert np.all(decided >= 0.5 - 1e-12)  # never below the other class: the decision cannot flip
    assert np.all((p >= 0) & (p <= 1))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.floats(-20, 20, allow_nan=False), min_size=3, max_size=3), min_size=1, max_size=20),
       st.floats(0.05, 20))
def test_temperature_keeps_multiclass_argmax(rows: list[list[float]], t: float) -> None:
    z = np.array(rows)
    p0, p1 = softmax(z), softmax(z / t)
    top = p0.max(axis=1, keepdims=True)
    unique = (np.isclose(p0, top)).sum(axis=1) == 1
    assert np.array_equal(p0.argmax(axis=1)[unique], p1.argmax(axis=1)[unique])


def test_top_label_calibrators_round_trip_params() -> None:
    from amsrag.calibration import calibrator_from_params

    z = np.array([-3.0, -1.0, -0.2, 0.1, 0.5, 2.0, 4.0])
    y = np.array([0, 0, 1, 0, 1, 1, 1])
    for cal in (TemperatureCalibrator.fit(z, y), PlattCalibrator.fit(z, y), IsotonicCalibrator.fit(z, y)):
        again = calibrator_from_params(cal.method, cal.params())
        np.testing.assert_allclose(again.prob1(z), cal.prob1(z))
