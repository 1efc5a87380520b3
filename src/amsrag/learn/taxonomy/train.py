"""Train the task head (`amsrag train taxonomy train`, or `python -m amsrag.learn.taxonomy.train`).

Multinomial logistic regression on standardised [MiniLM embedding, task features]; the inverse
regularisation C is picked by log-loss on the calibration rows, the temperature fitted there, and the
taxonomy's `min_confidence` thresholds chosen there under the default task cost matrix. Deterministic.
"""

from __future__ import annotations

import argparse
import logging
import tempfile
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from amsrag.artifacts import file_sha256
from amsrag.calibration import ece, fit_temperature
from amsrag.classify.task import TaskHead, mask_probs, shipped_artifact_dir
from amsrag.classify.task_features import task_features_batch
from amsrag.config import TaxonomyConfig
from amsrag.embed.encoder import Encoder, MiniLMEncoder
from amsrag.learn.common import standardise
from amsrag.learn.taxonomy.data import TaskRow, aggregation_rows, rows_hash, structured_rows, text_rows
from amsrag.route.taxonomy import task_cost, tune_min_confidence
from amsrag.tables.base import TableHit
from amsrag.types import TASK_KINDS

log = logging.getLogger(__name__)
C_GRID = (0.0003, 0.001, 0.003, 0.01, 0.03, 0.1)
SEARCH_K = 3


def table_context(data_dir: Path, workdir: Path, splits: Sequence[str]) -> dict[str, Any]:
    """One table store per WTQ split named (train / calibration / test), holding that split's tables."""
    from amsrag.learn.tables.data import load_tables, split_of
    from amsrag.store.embedded.tables import TableStore

    tables = load_tables(data_dir)
    stores = {}
    for split in splits:
        store = TableStore.open(workdir / f"{split}.sqlite", create=True)
        store.add([t for path, t in sorted(tables.items()) if split_of(path) == split])
        stores[split] = store
    return stores


def hits_for(rows: Sequence[TaskRow], stores: dict[str, Any]) -> list[list[TableHit]]:
    """Each row's best tables: from its own split's store, or from the other split's (a table question whose
    table the index lacks)."""
    own = {"train": "train", "cal": "calibration", "test": "test"}
    other = {"train": "calibration", "cal": "train", "test": "train"}
    return [stores[(other if r.other_tables else own)[r.split]].search(r.question, k=SEARCH_K) if r.with_tables
            else [] for r in rows]


def embed(encoder: Encoder, questions: Sequence[str]) -> np.ndarray:
    return np.asarray(encoder.encode(list(questions)), dtype=np.float64)


def fit_head(x_train: np.ndarray, y_train: np.ndarray, x_cal: np.ndarray, y_cal: np.ndarray,
             has_cal: np.ndarray, seed: int) -> tuple[TaskHead, dict[str, Any]]:
    from sklearn.linear_model import LogisticRegression

    mean, scale = standardise(x_train)
    z_train, z_cal = (x_train - mean) / scale, (x_cal - mean) / scale
    best: tuple[float, float, Any] | None = None
    losses = {}
    for c in C_GRID:
        model = LogisticRegression(C=c, max_iter=3000, random_state=seed).fit(z_train, y_train)
        p = mask_rows(model.predict_proba(z_cal), has_cal)
        loss = float(-np.mean(np.log(np.clip(p[np.arange(len(y_cal)), y_cal], 1e-12, 1))))
        losses[str(c)] = round(loss, 5)
        if best is None or loss < best[0]:
            best = (loss, c, model)
    assert best is not None
    _, c, model = best
    logits = z_cal @ model.coef_.T + model.intercept_
    temperature = fit_temperature(logits, y_cal)
    head = TaskHead(np.ascontiguousarray(model.coef_.T), np.asarray(model.intercept_, dtype=np.float64), mean, scale,
                    float(temperature), {})
    return head, {"C": c, "C_grid_log_loss": losses, "temperature": round(float(temperature), 5)}


def mask_rows(p: np.ndarray, has_tables: np.ndarray) -> np.ndarray:
    out = np.array(p, dtype=np.float64, copy=True)
    if (~has_tables).any():
        out[~has_tables] = mask_probs(out[~has_tables], False)
    return out


def metrics(p: np.ndarray, y: np.ndarray, thresholds: dict[str, float], costs: dict[str, dict[str, float]]
            ) -> dict[str, Any]:
    from amsrag.route.taxonomy import route_of_task

    pred = np.argmax(p, axis=1)
    routed = route_of_task(p, thresholds)
    out: dict[str, Any] = {"n": len(y), "accuracy": round(float((pred == y).mean()), 4),
                           "routed_accuracy": round(float((routed == y).mean()), 4),
                           "ece_top": round(ece(p.max(axis=1), pred == y), 4),
                           "mean_cost": round(task_cost(p, y, thresholds, costs), 4)}
    for j, kind in enumerate(TASK_KINDS):
        mask = y == j
        out[f"recall_{kind}"] = round(float((routed[mask] == j).mean()), 4) if mask.any() else None
        out[f"ece_{kind}"] = round(ece(p[:, j], y == j), 4)
    out["confusion"] = {TASK_KINDS[a]: {TASK_KINDS[b]: int(((y == a) & (routed == b)).sum()) for b in range(3)}
                        for a in range(3)}
    return out


def train(data_dir: Path, out: Path, seed: int = 13, n_text: int = 3000, n_structured: int = 4000,
          n_aggregation: int = 2500) -> dict[str, Any]:
    cal_share = 0.2
    rows = [*text_rows(data_dir, int(n_text * (1 - cal_share)), int(n_text * cal_share), seed),
            *structured_rows(data_dir, int(n_structured * (1 - cal_share)), int(n_structured * cal_share), 0, seed),
            *aggregation_rows(int(n_aggregation * (1 - cal_share)), int(n_aggregation * cal_share), 0, seed)]
    log.info("task head: %d rows (%s)", len(rows), dict(Counter((r.split, r.kind) for r in rows)))
    encoder: Encoder = MiniLMEncoder()
    with tempfile.TemporaryDirectory(prefix="amsrag-taxonomy-") as tmp:
        stores = table_context(data_dir, Path(tmp), ("train", "calibration"))
        hits = hits_for(rows, stores)
        for s in stores.values():
            s.close()
    features = task_features_batch([r.question for r in rows], hits)
    x = np.hstack([embed(encoder, [r.question for r in rows]), features])
    y = np.array([TASK_KINDS.index(r.kind) for r in rows])
    has = np.array([bool(h) for h in hits])
    tr = np.array([r.split == "train" for r in rows])
    head, fit = fit_head(x[tr], y[tr], x[~tr], y[~tr], has[~tr], seed)
    costs = TaxonomyConfig().costs
    p_cal = head.probabilities(x[~tr, : x.shape[1] - features.shape[1]], features[~tr], list(has[~tr]))
    thresholds = tune_min_confidence(p_cal, y[~tr], costs)
    tables_file = data_dir / "wikitablequestions" / "tables.tar.gz"
    questions_file = data_dir / "wikitablequestions" / "training.tsv"
    card = {
        "trained_by": "amsrag train taxonomy train --data DATA --out DIR (python -m amsrag.learn.taxonomy.train)",
        "seed": seed, "rows_sha256": rows_hash(rows),
        "data": {"wikitablequestions/training.tsv": file_sha256(questions_file),
                 "wikitablequestions/tables.tar.gz": file_sha256(tables_file),
                 "text": "the complexity classifier's train / cal questions (learn.classifier.data)",
                 "aggregation": "templates, train family (learn.taxonomy.aggregation)"},
        "counts": {f"{s}/{k}": n for (s, k), n in sorted(Counter((r.split, r.kind) for r in rows).items())},
        "fit": fit, "min_confidence": thresholds,
        "calibration_metrics": metrics(p_cal, y[~tr], thresholds, costs),
    }
    head.save(out, card)
    log.info("task head saved to %s: %s", out, card["calibration_metrics"])
    return card


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--data", type=Path, default=Path("../shared/data"))
    ap.add_argument("--out", type=Path, default=shipped_artifact_dir())
    ap.add_argument("--seed", type=int, default=13)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    train(args.data, args.out, args.seed)


if __name__ == "__main__":
    main()
