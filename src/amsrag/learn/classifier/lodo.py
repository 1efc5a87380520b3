"""How the hop decision holds up on data it has not seen: leave-one-data-set-out (LODO) models and reports,
recalibration on a deployment's own labelled questions, and the query library's learning curve.

For each data set D, a hop head is trained on the train rows of every other data set and calibrated on their
calibration mix; it is then judged on every row of D (none of which it saw). The query library's blend
settings are fitted the same way: a library of D's train rows, judged on D's cal rows; the learning curve is
reported on D's test rows.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import asdict
from typing import Any

import numpy as np

from amsrag.calibration import fit_calibrator
from amsrag.classify.library import LibrarySettings, QueryLibrary, Weighting
from amsrag.classify.model import ComplexityClassifier
from amsrag.learn.classifier.evaluate import hop_metrics
from amsrag.learn.classifier.train import Prepared, TrainConfig, calibration_mix, train_hop_only
from amsrag.learn.common import seeded_rank

LIBRARY_SIZES = (0, 100, 500, 2000)
LIBRARY_GRID: dict[str, tuple[float, ...]] = {"threshold": (0.3, 0.4, 0.5, 0.6, 0.7, 0.8), "k": (5, 10, 20),
                                              "strength": (0.25, 0.5, 1.0, 2.0, 4.0, 8.0)}
WEIGHTINGS: tuple[Weighting, ...] = ("cosine", "margin")
UNRELATED_QUERIES = 20
RECALIBRATION_ROWS = 300


def lodo_models(prep: Prepared, config: TrainConfig,
                progress: Callable[[str], None] | None = None) -> dict[str, ComplexityClassifier]:
    models = {}
    for d in sorted(set(prep.datasets.tolist())):
        if progress is not None:
            progress(d)
        models[d] = train_hop_only(prep, config, exclude_dataset=d)
    return models


def hop_outputs(clf: ComplexityClassifier, prep: Prepared, rows: np.ndarray,
                library: QueryLibrary | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(p_multi, raw hop logit) of `clf` on `rows`, blended with `library`'s votes when given."""
    zh = clf.hop.logits(prep.embeddings[rows], prep.features[rows])
    p = clf.hop.calibrator.prob1(zh)
    if library is not None and len(library):
        p = library.vote_batch(prep.embeddings[rows], clf.library_settings).blend(p)
    return p, zh


def metrics_of(p_multi: np.ndarray, y: np.ndarray) -> dict[str, Any]:
    pred = (p_multi >= 0.5).astype(int)
    conf = np.where(pred == 1, p_multi, 1.0 - p_multi)
    # hop-only: the label is the hop decision, alpha its confidence
    return hop_metrics(y, pred, conf, np.where(pred == 1, 2, 1), conf)


def lodo_report(prep: Prepared, models: dict[str, ComplexityClassifier]) -> dict[str, Any]:
    """Per held-out data set: hop accuracy, ECE, reliability and confident-downward on all of its rows."""
    out = {}
    for d, clf in models.items():
        rows = prep.mask(dataset=d)
        p, _ = hop_outputs(clf, prep, rows)
        out[d] = metrics_of(p, prep.hop_y[rows])
    return out


def sample_rows(prep: Prepared, rows: np.ndarray, n: int, seed: int, salt: str) -> np.ndarray:
    """`n` of `rows` in a seeded order (as a boolean mask)."""
    idx = sorted(np.flatnonzero(rows), key=lambda i: seeded_rank(seed, f"{salt}\x1f{prep.rows[i].key}"))
    out = np.zeros(len(prep.rows), dtype=bool)
    out[idx[:n]] = True
    return out


def recalibration(prep: Prepared, models: dict[str, ComplexityClassifier], config: TrainConfig,
                  n: int = RECALIBRATION_ROWS) -> dict[str, Any]:
    """What `amsrag train classifier calibrate --qa` buys a deployment: each LODO model's temperature refitted on
    `n` labelled questions of its held-out data set (its cal rows), judged on that data set's test rows."""
    out = {}
    for d, clf in models.items():
        fit_rows = sample_rows(prep, prep.mask("cal", dataset=d), n, config.seed, "recalibrate")
        test = prep.mask("test", dataset=d)
        before, _ = hop_outputs(clf, prep, test)
        zh = clf.hop.logits(prep.embeddings[fit_rows], prep.features[fit_rows])
        calibrator = fit_calibrator(config.calibration, zh, prep.hop_y[fit_rows])
        after = calibrator.prob1(clf.hop.logits(prep.embeddings[test], prep.features[test]))
        out[d] = {"rows": int(fit_rows.sum()), "before": metrics_of(before, prep.hop_y[test]),
                  "after": metrics_of(after, prep.hop_y[test]),
                  "params": {k: v.tolist() for k, v in calibrator.params().items() if v.size <= 4}}
    return out


def library_of(prep: Prepared, rows: np.ndarray, source: str) -> QueryLibrary:
    library = QueryLibrary.empty()
    idx = np.flatnonzero(rows)
    if len(idx):
        library.add([prep.rows[i].question for i in idx], [prep.rows[i].hop for i in idx],
                    prep.embeddings[idx], source)
    return library


def base_rows(prep: Prepared, config: TrainConfig, exclude_dataset: str | None = None) -> np.ndarray:
    """A model's calibration mix (labelled queries it was not trained on): the other traffic of a mixed library."""
    return calibration_mix(prep, prep.mask("cal", exclude_dataset=exclude_dataset),
                           config.calibration_rows_per_dataset, config.seed)


def _with_settings(clf: ComplexityClassifier, settings: LibrarySettings) -> ComplexityClassifier:
    return ComplexityClassifier(clf.hop, clf.knowledge, clf.zero_logit, clf.meta, library_settings=settings)


def fit_library_settings(
    prep: Prepared, models: dict[str, ComplexityClassifier], config: TrainConfig, size: int = 500,
    unrelated: int = UNRELATED_QUERIES,
) -> tuple[LibrarySettings, list[dict[str, Any]]]:
    """The blend settings maximising, leave-one-data-set-out on held-out cal rows, the mean hop accuracy with a
    library of mixed traffic (the other data sets' calibration mix and `size` of the held-out data set's train
    rows) plus the mean harm (≤ 0) of a small library of `unrelated` queries from the other data sets — a
    deployment's first few labelled questions must not swing routes they have nothing to do with. Ties go to
    the higher threshold (the library speaks less)."""
    mixed, small, alone = {}, {}, {}
    for d, clf in models.items():
        base = base_rows(prep, config, d)
        mixed[d] = library_of(prep, base | sample_rows(prep, prep.mask("train", dataset=d), size, config.seed,
                                                       "library"), "train")
        small[d] = library_of(prep, sample_rows(prep, base, unrelated, config.seed, "unrelated"), "unrelated")
        rows = prep.mask("cal", dataset=d)
        alone[d] = _accuracy(clf, prep, rows, None)
    trace, best = [], (-1.0, 0.0, LibrarySettings())
    grid = itertools.product(WEIGHTINGS, LIBRARY_GRID["threshold"], LIBRARY_GRID["k"], LIBRARY_GRID["strength"])
    for weighting, threshold, k, strength in grid:
        settings = LibrarySettings(threshold=threshold, k=int(k), strength=strength, weighting=weighting)
        gains, harms = [], []
        for d, clf in models.items():
            tuned, rows = _with_settings(clf, settings), prep.mask("cal", dataset=d)
            gains.append(_accuracy(tuned, prep, rows, mixed[d]))
            harms.append(min(0.0, _accuracy(tuned, prep, rows, small[d]) - alone[d]))
        score = float(np.mean(gains) + np.mean(harms))
        trace.append({**asdict(settings), "mean_cal_accuracy": float(np.mean(gains)),
                      "mean_harm_unrelated": float(np.mean(harms)), "score": score})
        if (round(score, 9), threshold) > (round(best[0], 9), best[1]):
            best = (score, threshold, settings)
    return best[2], trace


def _accuracy(clf: ComplexityClassifier, prep: Prepared, rows: np.ndarray, library: QueryLibrary | None) -> float:
    p, _ = hop_outputs(clf, prep, rows, library)
    return float(np.mean((p >= 0.5) == prep.hop_y[rows]))


def library_curve(prep: Prepared, models: dict[str, ComplexityClassifier], config: TrainConfig,
                  settings: LibrarySettings, sizes: Sequence[int] = LIBRARY_SIZES) -> dict[str, Any]:
    """Per held-out data set: hop metrics on its test rows with a library of 0 (none), 100, 500, 2,000 of its
    labelled train questions (capped by what it has): alone (`own`: a deployment's library) and beside the
    other data sets' calibration mix (`mixed`: a library of mixed traffic, as the settings were fitted); and
    with only a few queries unrelated to it (`unrelated`: the harm a young library may do)."""
    out: dict[str, Any] = {}
    for d, clf in models.items():
        tuned = _with_settings(clf, settings)
        test = prep.mask("test", dataset=d)
        train_rows = prep.mask("train", dataset=d)
        base = base_rows(prep, config, d)
        out[d] = {"own": {}, "mixed": {}}
        for size in sizes:
            rows = sample_rows(prep, train_rows, size, config.seed, "library")
            for kind, library_rows in (("own", rows), ("mixed", base | rows)):
                library = library_of(prep, library_rows, "train") if library_rows.any() else None
                p, _ = hop_outputs(tuned, prep, test, library)
                out[d][kind][str(size)] = {**metrics_of(p, prep.hop_y[test]), "library": int(library_rows.sum())}
        unrelated = sample_rows(prep, base, UNRELATED_QUERIES, config.seed, "unrelated")
        p, _ = hop_outputs(tuned, prep, test, library_of(prep, unrelated, "unrelated"))
        out[d]["unrelated"] = {**metrics_of(p, prep.hop_y[test]), "library": int(unrelated.sum())}
    return out
