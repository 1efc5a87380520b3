"""Leave-one-data-set-out training, recalibration and the query library's fit, on synthetic rows."""

from __future__ import annotations

import numpy as np

from amsrag.classify.features import N_FEATURES
from amsrag.ingest.datasets import LabelledQuestion
from amsrag.learn.classifier.lodo import (
    LIBRARY_GRID,
    fit_library_settings,
    library_curve,
    lodo_models,
    lodo_report,
    recalibration,
)
from amsrag.learn.classifier.train import Prepared, TrainConfig, train_hop_only

DATASETS = {"alpha": "multi_hop", "beta": "one_hop", "gamma": "multi_hop", "delta": "one_hop"}


def _prepared(seed: int = 0) -> Prepared:
    """Four data sets; the hop signal sits in embedding dim 0, each data set adds its own style (dim 1..4),
    and each data set's questions cluster (so a library of its own questions helps)."""
    rng = np.random.default_rng(seed)
    rows, emb = [], []
    for j, (d, hop) in enumerate(DATASETS.items()):
        centre = rng.normal(size=384)
        for i in range(300):
            e = centre + 1.2 * rng.normal(size=384)
            e[0] += 2.0 if hop == "multi_hop" else -2.0
            e[1 + j] += 3.0
            split = "train" if i < 200 else "cal" if i < 250 else "test"
            rows.append(LabelledQuestion(f"{d}{i}", f"{d} question {i}?", d, "dataset", hop, None, split))  # type: ignore[arg-type]
            emb.append(e / np.linalg.norm(e))
    return Prepared(rows, np.asarray(emb, np.float32), np.zeros((len(rows), N_FEATURES), np.float32),
                    np.zeros(len(rows), bool))


def test_each_model_leaves_its_data_set_out() -> None:
    prep, config = _prepared(), TrainConfig()
    models = lodo_models(prep, config)
    assert sorted(models) == sorted(DATASETS)
    again = train_hop_only(prep, config, exclude_dataset="alpha")
    assert np.allclose(models["alpha"].hop.coef, again.hop.coef)
    whole = train_hop_only(prep, config)
    assert not np.allclose(models["alpha"].hop.coef, whole.hop.coef)  # alpha's rows moved the full model
    report = lodo_report(prep, models)
    assert all(report[d]["n"] == 300 and 0.0 <= report[d]["accuracy"] <= 1.0 for d in DATASETS)
    assert all(0.0 <= report[d]["ece"] <= 1.0 for d in DATASETS)


def test_recalibration_and_the_library_on_held_out_data() -> None:
    prep, config = _prepared(1), TrainConfig()
    models = lodo_models(prep, config)
    recal = recalibration(prep, models, config, n=50)
    assert all(r["rows"] == 50 and r["after"]["n"] == 50 for r in recal.values())
    settings, trace = fit_library_settings(prep, models, config, size=100)
    grid = LIBRARY_GRID
    assert len(trace) == 2 * len(grid["threshold"]) * len(grid["k"]) * len(grid["strength"])
    assert settings.threshold in grid["threshold"] and settings.strength in grid["strength"]
    best = max(t["score"] for t in trace)
    assert any(t["score"] == best and t["threshold"] == settings.threshold for t in trace)
    assert all(t["mean_harm_unrelated"] <= 0.0 and t["score"] <= t["mean_cal_accuracy"] for t in trace)
    curve = library_curve(prep, models, config, settings, sizes=(0, 100))
    for d in DATASETS:
        own = curve[d]["own"]
        assert own["0"]["library"] == 0 and own["100"]["library"] == 100
        assert own["100"]["accuracy"] >= own["0"]["accuracy"]  # its own questions cluster: the library helps
