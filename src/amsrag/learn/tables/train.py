"""Train the semantic parser's ranker on WikiTableQuestions and write its artifact.

    OMP_NUM_THREADS=1 python -m amsrag.learn.tables.train --data ../shared/data --out src/amsrag/data/tables

Split by table (`data.split_of`): the ranker learns from the training tables' questions; on the calibration
tables (never fitted on) both rankers — LightGBM lambdarank and a logistic regression — are compared, the
better one is kept, and the confidence (Platt scaling of the top score and its margin) is fitted; the test
tables (`data.is_test_table`) are scored once, for the card. Deterministic: LightGBM with `deterministic`,
row-wise histograms, one thread and fixed seeds; liblinear for the logistic regression.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from amsrag.artifacts import file_sha256, write_npz
from amsrag.calibration import ece
from amsrag.learn.common import lambdarank_params, standardise
from amsrag.learn.tables.collect import Group, collect, load_groups, save_groups
from amsrag.learn.tables.data import (
    QUESTIONS_FILE,
    SPLIT_RULE,
    TABLES_FILE,
    WTQ_DIR,
    load_questions,
    load_tables,
    split_of,
)
from amsrag.structured.features import FEATURES, FEATURES_VERSION
from amsrag.structured.parser import (
    CARD_FILE,
    CARD_VERSION,
    LIGHTGBM_FILE,
    LOGISTIC_FILE,
    TRAIN_COMMAND,
    Ranker,
    best_index,
    confidence_of,
)
from amsrag.structured.programs import MAX_CANDIDATES


@dataclass(frozen=True, slots=True)
class TrainSettings:
    seed: int = 13
    rounds: int = 400
    num_leaves: int = 31
    learning_rate: float = 0.05
    min_data_in_leaf: int = 50
    feature_fraction: float = 0.8
    lambda_l2: float = 1.0
    logistic_c: float = 1.0

    def lgb_params(self) -> dict[str, Any]:
        return lambdarank_params(self.seed, self.num_leaves, self.learning_rate, self.min_data_in_leaf,
                                 self.feature_fraction, self.lambda_l2, eval_at=1, truncation=20)


def _trainable(groups: Sequence[Group]) -> list[Group]:
    """Groups with a ranking signal: some positive and some negative candidate."""
    return [g for g in groups if len(g.labels) and 0 < g.labels.sum() < len(g.labels)]


def fit_lightgbm(groups: Sequence[Group], settings: TrainSettings) -> Ranker:
    import lightgbm as lgb

    used = _trainable(groups)
    x = np.concatenate([g.x for g in used])
    y = np.concatenate([g.labels for g in used])
    data = lgb.Dataset(x, y, group=[len(g.labels) for g in used], feature_name=list(FEATURES), free_raw_data=False)
    return Ranker("lightgbm", booster=lgb.train(settings.lgb_params(), data, num_boost_round=settings.rounds))


def fit_logistic(groups: Sequence[Group], settings: TrainSettings) -> Ranker:
    from sklearn.linear_model import LogisticRegression

    used = _trainable(groups)
    x = np.concatenate([g.x for g in used])
    y = np.concatenate([g.labels for g in used])
    # Each question weighs the same, however many candidates it has.
    w = np.concatenate([np.full(len(g.labels), 1.0 / len(g.labels)) for g in used])
    mean, scale = standardise(x)
    model = LogisticRegression(C=settings.logistic_c, solver="liblinear", max_iter=500, random_state=settings.seed)
    model.fit((x - mean) / scale, y, sample_weight=w * len(used))
    return Ranker("logistic", weights=model.coef_[0].astype(np.float64), mean=mean, scale=scale,
                  bias=float(model.intercept_[0]))


def evaluate(ranker: Ranker, groups: Sequence[Group]) -> dict[str, Any]:
    """Top-1 denotation accuracy, the oracle (any candidate right), and accuracy per chosen kind."""
    by_kind: dict[str, list[float]] = defaultdict(list)
    correct, oracle = [], []
    for g in groups:
        scores = ranker.score(g.x)
        best = best_index(scores)
        ok = float(best >= 0 and g.labels[best] > 0)
        correct.append(ok)
        oracle.append(float(g.labels.any()) if len(g.labels) else 0.0)
        by_kind[g.kinds[best] if best >= 0 else "none"].append(ok)
    n = max(len(groups), 1)
    return {"questions": len(groups), "accuracy": round(sum(correct) / n, 4), "oracle": round(sum(oracle) / n, 4),
            "per_kind": {k: {"chosen": len(v), "accuracy": round(float(np.mean(v)), 4)}
                         for k, v in sorted(by_kind.items(), key=lambda kv: -len(kv[1]))}}


def top_and_margin(ranker: Ranker, groups: Sequence[Group]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per question with a candidate: the top score, its margin over the runner-up, and whether it is right."""
    tops, margins, right = [], [], []
    for g in groups:
        if not len(g.labels):
            continue
        s = ranker.score(g.x)
        order = np.sort(s)[::-1]
        tops.append(order[0])
        margins.append(order[0] - order[1] if len(order) > 1 else math.nan)
        right.append(float(g.labels[best_index(s)] > 0))
    m = np.asarray(margins)
    single = float(np.nanmedian(m)) if np.isfinite(m).any() else 1.0
    m[~np.isfinite(m)] = single
    return np.asarray(tops), m, np.asarray(right)


def fit_platt(ranker: Ranker, groups: Sequence[Group], seed: int) -> dict[str, float]:
    from sklearn.linear_model import LogisticRegression

    tops, margins, right = top_and_margin(ranker, groups)
    model = LogisticRegression(C=100.0, solver="lbfgs", max_iter=1000, random_state=seed)
    model.fit(np.stack([tops, margins], axis=1), right)
    finite = [g for g in groups if len(g.labels) > 1]
    single = float(np.median([np.subtract(*np.sort(ranker.score(g.x))[::-1][:2]) for g in finite])) if finite else 1.0
    return {"a_score": float(model.coef_[0][0]), "a_margin": float(model.coef_[0][1]),
            "b": float(model.intercept_[0]), "single_margin": single}


def calibration_metrics(ranker: Ranker, groups: Sequence[Group], platt: dict[str, float]) -> dict[str, float]:
    conf, right = [], []
    for g in groups:
        s = ranker.score(g.x)
        conf.append(confidence_of(s, platt))
        right.append(float(len(s) > 0 and g.labels[best_index(s)] > 0))
    c, y = np.asarray(conf), np.asarray(right)
    return {"ece": round(ece(c, y), 4), "mean_confidence": round(float(c.mean()), 4),
            "accuracy": round(float(y.mean()), 4),
            "accuracy_at_confidence_0.5": round(float(y[c >= 0.5].mean()), 4) if (c >= 0.5).any() else math.nan,
            "share_confidence_0.5": round(float((c >= 0.5).mean()), 4)}


def importance(ranker: Ranker, top: int = 15) -> dict[str, float]:
    if ranker.kind == "lightgbm":
        gains = np.asarray(ranker.booster.feature_importance(importance_type="gain"), dtype=np.float64)
    else:
        assert ranker.weights is not None
        gains = np.abs(ranker.weights)
    total = float(gains.sum()) or 1.0
    return {FEATURES[i]: round(float(gains[i]) / total, 4) for i in np.argsort(-gains)[:top]}


def write_artifact(out: Path, ranker: Ranker, card: dict[str, Any]) -> None:
    """The model file and the card, written beside `out` and moved in card last."""
    staging = out.with_name(f".{out.name}.tmp")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    if ranker.kind == "lightgbm":
        model_name = LIGHTGBM_FILE
        (staging / model_name).write_text(ranker.booster.model_to_string(num_iteration=-1), encoding="utf-8")
    else:
        model_name = LOGISTIC_FILE
        assert ranker.weights is not None and ranker.mean is not None and ranker.scale is not None
        write_npz(staging / model_name, {"weights": ranker.weights, "mean": ranker.mean, "scale": ranker.scale,
                                         "bias": np.asarray(ranker.bias)})
    card = {**card, "model_file": model_name, "model_sha256": file_sha256(staging / model_name)}
    (staging / CARD_FILE).write_text(json.dumps(card, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    out.mkdir(parents=True, exist_ok=True)
    for stale in (LIGHTGBM_FILE, LOGISTIC_FILE):
        if stale != model_name and (out / stale).exists():
            (out / stale).unlink()
    for name in (model_name, CARD_FILE):
        os.replace(staging / name, out / name)
    staging.rmdir()


def train_parser(data_dir: Path, out: Path, settings: TrainSettings, model: str = "auto",
                 log: Callable[[str], None] = print, limit: int | None = None,
                 groups_cache: Path | None = None) -> dict[str, Any]:
    started = time.time()
    questions = load_questions(data_dir)[:limit]
    tables = load_tables(data_dir, sorted({q.table for q in questions}))
    log(f"{len(questions)} questions over {len(tables)} tables; collecting candidates")
    from amsrag.embed.encoder import MiniLMEncoder

    if groups_cache is not None and groups_cache.is_file():
        groups = load_groups(groups_cache)
        log(f"candidates read from {groups_cache}")
    else:
        groups = collect(questions, tables, MiniLMEncoder(), progress=lambda i: log(f"  {i} questions"))
        if groups_cache is not None:
            save_groups(groups_cache, groups)
    collected_s = time.time() - started
    by_split: dict[str, list[Group]] = defaultdict(list)
    for g in groups:
        by_split[g.split].append(g)
    log(f"collected in {collected_s:.0f} s: " + ", ".join(f"{k} {len(v)}" for k, v in sorted(by_split.items())))
    rankers = {"lightgbm": fit_lightgbm(by_split["train"], settings),
               "logistic": fit_logistic(by_split["train"], settings)}
    dev = {name: evaluate(r, by_split["calibration"]) for name, r in rankers.items()}
    for name, m in dev.items():
        log(f"calibration tables, {name}: accuracy {m['accuracy']} (oracle {m['oracle']})")
    chosen = model if model != "auto" else max(dev, key=lambda k: (dev[k]["accuracy"], k == "lightgbm"))
    ranker = rankers[chosen]
    platt = fit_platt(ranker, by_split["calibration"], settings.seed)
    test = evaluate(ranker, by_split["test"])
    test_other = {name: evaluate(r, by_split["test"])["accuracy"] for name, r in rankers.items()}
    log(f"chosen {chosen}; test tables: accuracy {test['accuracy']} (oracle {test['oracle']})")
    tables_by_split = Counter(g.split for g in groups)
    card: dict[str, Any] = {
        "card_version": CARD_VERSION, "kind": "semantic parser ranker over candidate SQL programs",
        "model": chosen, "features": {"version": FEATURES_VERSION, "names": list(FEATURES)},
        "settings": {**asdict(settings), "lightgbm": settings.lgb_params(), "max_candidates": MAX_CANDIDATES},
        "data": {"files": {f"{WTQ_DIR}/{name}": file_sha256(data_dir / WTQ_DIR / name)
                           for name in (QUESTIONS_FILE, TABLES_FILE)},
                 "split_rule": SPLIT_RULE, "split_function": "amsrag.learn.tables.data.is_test_table",
                 "questions": dict(sorted(tables_by_split.items())),
                 "tables": dict(sorted(Counter(split_of(p) for p in tables).items())),
                 "trainable_groups": len(_trainable(by_split["train"]))},
        "calibration": {"method": "platt on (top score, margin over the runner-up), calibration tables",
                        "platt": platt,
                        "calibration_tables": calibration_metrics(ranker, by_split["calibration"], platt),
                        "test_tables": calibration_metrics(ranker, by_split["test"], platt)},
        "metrics": {"selection": {name: m["accuracy"] for name, m in dev.items()},
                    "selection_split": "calibration tables (training tables never fitted on)",
                    "calibration_tables": dev[chosen], "test_tables": test,
                    "test_tables_accuracy_by_model": test_other,
                    "train_tables": {k: v for k, v in evaluate(ranker, by_split["train"]).items() if k != "per_kind"}},
        "feature_importance": importance(ranker),
        "rebuild": f"OMP_NUM_THREADS=1 {TRAIN_COMMAND}",
        "train_seconds": round(time.time() - started),
    }
    write_artifact(out, ranker, card)
    return card


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m amsrag.learn.tables.train", description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data"), help="the shared data folder")
    parser.add_argument("--out", type=Path, default=Path("src/amsrag/data/tables"), help="artifact folder")
    parser.add_argument("--model", choices=("auto", "lightgbm", "logistic"), default="auto")
    parser.add_argument("--rounds", type=int, default=TrainSettings().rounds)
    parser.add_argument("--groups-cache", type=Path, default=None,
                        help="an .npz of collected candidates: read when it exists, else written (reruns of the fit)")
    parser.add_argument("--limit", type=int, default=None, help="the first N questions only (smoke runs)")
    args = parser.parse_args(argv)
    settings = TrainSettings(rounds=args.rounds)
    card = train_parser(args.data, args.out, settings, args.model, limit=args.limit, groups_cache=args.groups_cache)
    print(json.dumps({"out": str(args.out), "model": card["model"], "metrics": card["metrics"]["test_tables"],
                      "seconds": card["train_seconds"]}, indent=1))


if __name__ == "__main__":
    main()
