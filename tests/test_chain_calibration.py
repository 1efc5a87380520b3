"""The chain's calibration: the shipped `chain.json`, its loading errors, and the fitter's contract."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from amsrag.decompose.calibration import CALIBRATION_FILE, FEATURES, ChainCalibration, chain_features
from amsrag.decompose.plan import Plan
from amsrag.decompose.tagger import DecomposerArtifactError, default_directory
from amsrag.learn.decomposer.calibrate import fit


def test_shipped_calibration_has_a_weight_per_feature_and_names_its_runs():
    cal = ChainCalibration.load()
    assert cal is not None, "chain.json ships beside the decomposer"
    assert len(cal.weights) == len(FEATURES)
    assert set(cal.thresholds) <= {"bridge", "comparison", "intersection", "implicit"}
    assert all(0.0 <= t < 1.0 for t in cal.thresholds.values())
    runs = cal.card["runs"]
    assert runs and all(len(r["predictions_sha256"]) == 64 for r in runs)
    assert cal.card["excluded"] > 0, "the evaluated questions are left out of the fit"


def test_a_chain_whose_steps_read_surely_is_more_probable_than_an_unsure_one():
    cal = ChainCalibration.load()
    assert cal is not None
    plan = Plan("bridge", {"bridge": 0.95, "single": 0.05})
    sure = cal.probability(chain_features(plan, [0.8, 0.7], "Paris", "Lyon", 0.2, 0.7))
    unsure = cal.probability(chain_features(plan, [0.05, 0.1], "Paris", "Lyon", 0.2, 0.05))
    assert sure > unsure


def test_corrupt_or_mismatched_calibration_is_a_clear_error_naming_the_file(tmp_path):
    assert ChainCalibration.load(tmp_path) is None  # none fitted: raw step confidences
    (tmp_path / CALIBRATION_FILE).write_text("{not json", "utf-8")
    with pytest.raises(DecomposerArtifactError, match=str(tmp_path / CALIBRATION_FILE)):
        ChainCalibration.load(tmp_path)
    shutil.copy(default_directory() / CALIBRATION_FILE, tmp_path / CALIBRATION_FILE)
    card = json.loads((tmp_path / CALIBRATION_FILE).read_text("utf-8"))
    card["weights"] = card["weights"][:-1]
    (tmp_path / CALIBRATION_FILE).write_text(json.dumps(card), "utf-8")
    with pytest.raises(DecomposerArtifactError, match="weights for"):
        ChainCalibration.load(tmp_path)


def test_fit_learns_which_chains_are_right_and_sets_thresholds_at_the_coverage():
    rng = np.random.default_rng(0)
    plan = Plan("bridge", {"bridge": 0.9, "single": 0.1})
    records = []
    for i in range(200):
        step = float(rng.uniform(0.02, 0.9))
        right = rng.uniform() < step  # a surer weakest step is right more often
        records.append({"question": f"q{i}", "kind": "bridge", "answered": True,
                        "features": chain_features(plan, [step, 0.9], "a", "b", 0.1, step),
                        "chain_f1": 1.0 if right else 0.0, "plain_f1": 0.0, "plain_confidence": 0.1})
    card = fit(records, coverage=0.9)
    assert card["weights"][FEATURES.index("min_step")] > 0
    assert card["metrics"]["roc_auc_in_sample"] > 0.6
    assert card["metrics"]["by_kind"]["bridge"]["answered"] == pytest.approx(0.9, abs=0.01)
    everything = fit(records, coverage=1.0)
    assert everything["metrics"]["by_kind"]["bridge"]["answered"] == 1.0
