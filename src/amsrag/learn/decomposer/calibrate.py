"""Fit the chain's calibration (`amsrag train decomposer calibrate`): answer calibration questions with `full` (chains
on, uncalibrated), record each multi-step question's chain features and whether the chain's and the plain
reader's answers are right (token F1 >= 0.5 against the gold answers), fit a logistic model of the chain being
right, and set each plan type's threshold so that at most 1 - `coverage` of its calibration questions are
abstained on. The questions must be disjoint from any evaluated ones (an eval benchmark's calibration.jsonl is).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from amsrag.decompose.calibration import CALIBRATION_FILE, FEATURES, chain_features
from amsrag.generate.metrics import f1_score
from amsrag.progress import progress_for

RIGHT_F1 = 0.5
COVERAGE = 0.9  # chosen on seeds 15 and 16 replayed on each other (docs/benchmarks/compose/README.md)
C = 1.0


def read_qa(path: Path) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [r for r in rows if r.get("question") and r.get("answers")]


def best_f1(answer: str, golds: list[str]) -> float:
    return f1_score(answer, golds) if answer else 0.0


def collect(index_dir: Path, rows: list[dict[str, Any]], quiet: bool = False) -> list[dict[str, Any]]:
    """One record per question the decomposer planned in several steps."""
    from amsrag.pipeline import Engine

    out = []
    with Engine.open(index_dir) as engine, progress_for(quiet=quiet).task("chains", len(rows)) as advance:
        engine.composer.calibration_off = True  # features of the raw chain, not of an earlier calibration
        for r in rows:
            vector = engine.index.encoder.encode_query(r["question"])
            answered = engine.answer(r["question"], "full", engine.generator, vector)
            chain = answered.retrieval.trace.chain
            advance(1)
            if chain is None or not chain.plan.multi_step:
                continue
            plain_conf = float(chain.plain_confidence or 0.0)
            out.append({
                "question": r["question"], "kind": chain.plan.kind, "answered": chain.answered,
                "features": chain_features(chain.plan, [s.confidence for s in chain.steps], chain.answer,
                                           chain.plain_answer, plain_conf, chain.confidence),
                "chain_f1": best_f1(chain.answer, r["answers"]) if chain.answered else 0.0,
                "plain_f1": best_f1(chain.plain_answer, r["answers"]), "plain_confidence": plain_conf})
    return out


def fit(records: list[dict[str, Any]], coverage: float = COVERAGE) -> dict[str, Any]:
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score

    chained = [r for r in records if r["answered"]]
    x = np.array([r["features"] for r in chained])
    y = np.array([r["chain_f1"] >= RIGHT_F1 for r in chained], dtype=int)
    weights = np.zeros(len(FEATURES))
    auc = None
    if len(set(y.tolist())) == 2:
        lr = LogisticRegression(C=C, max_iter=2000, fit_intercept=False)
        lr.fit(x, y)
        weights = lr.coef_[0]
        auc = round(float(roc_auc_score(y, lr.predict_proba(x)[:, 1])), 4)

    def prob(features: list[float]) -> float:
        return float(1 / (1 + np.exp(-np.dot(weights, features))))

    by_kind: dict[str, list[tuple[float, float]]] = defaultdict(list)  # (standing probability, its F1)
    for r in records:
        p_plain = r["plain_confidence"]
        p_chain = prob(r["features"]) if r["answered"] else -1.0
        by_kind[r["kind"]].append((p_chain, r["chain_f1"]) if p_chain >= p_plain else (p_plain, r["plain_f1"]))
    thresholds, report = {}, {}
    for kind, pairs in sorted(by_kind.items()):
        probs = np.array([p for p, _ in pairs])
        t = float(np.quantile(probs, 1 - coverage)) if len(pairs) >= 10 else 0.0
        answered = [f for p, f in pairs if p >= t]
        thresholds[kind] = round(t, 4)
        report[kind] = {"n": len(pairs), "threshold": round(t, 4), "answered": round(len(answered) / len(pairs), 4),
                        "precision_answered": round(float(np.mean([f >= RIGHT_F1 for f in answered])), 4)
                        if answered else None,
                        "f1": round(float(sum(answered) / len(pairs)), 4)}
    return {"weights": [round(float(w), 6) for w in weights], "features": list(FEATURES),
            "thresholds": thresholds, "coverage": coverage, "right_f1": RIGHT_F1,
            "metrics": {"chains": len(chained), "chain_right": int(y.sum()) if len(y) else 0, "roc_auc_in_sample": auc,
                        "by_kind": report}}


def calibrate(index_dir: Path, qa: Path, out: Path, coverage: float = COVERAGE, quiet: bool = False) -> dict[str, Any]:
    t0 = time.perf_counter()
    rows = read_qa(qa)
    records = collect(index_dir, rows, quiet)
    card = fit(records, coverage)
    card.update({"questions": len(rows), "multi_step": len(records),
                 "qa_file": str(qa), "qa_sha256": hashlib.sha256(qa.read_bytes()).hexdigest(),
                 "index": str(index_dir), "seconds": round(time.perf_counter() - t0, 1),
                 "command": f"amsrag train decomposer calibrate --index INDEX --qa {qa.name} --out DIR "
                            f"--coverage {coverage}"})
    out.mkdir(parents=True, exist_ok=True)
    (out / CALIBRATION_FILE).write_text(json.dumps(card, indent=1) + "\n", encoding="utf-8")
    (out / "chain-records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return card
