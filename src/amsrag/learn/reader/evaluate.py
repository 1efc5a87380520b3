"""Calibration (confidence and abstention threshold) and held-out evaluation of the span reader.

Settings: `gold` = the gold passage(s) only; `mixed` = gold + 3 distractors read jointly (HotpotQA's own
distractors; for SQuAD/NQ hard negatives by question-word overlap); `none` = 4 distractors without the
answer (right behaviour: abstain). Right = token F1 >= 0.5.
"""

from __future__ import annotations

import random
import statistics
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from amsrag.generate.metrics import exact_match, token_f1
from amsrag.generate.reader_model import SpanReader
from amsrag.generate.reader_windows import context_of
from amsrag.learn.reader.data import Item, Para, find_answer, overlap_pick
from amsrag.types import Passage

FEATURES = ("score", "margin", "prob", "p_yesno", "yn_question", "yn_margin", "is_yesno", "is_option", "opt_margin")
RIGHT_F1 = 0.5


def _passages(paras: list[Para], rng: random.Random) -> list[Passage]:
    paras = paras[:]
    rng.shuffle(paras)
    return [Passage(id=f"{'g' if p.gold else 'd'}{i}", title=p.title, text=p.text) for i, p in enumerate(paras)]


def settings_for(it: Item, pool: list[Para], rng: random.Random, n_distractors: int = 3) -> dict[str, list[Passage]]:
    gold = it.gold_paras()
    ds = [p for p in it.distractors() if find_answer(context_of(p.title, p.text), it.answers) is None]
    picked = rng.sample(ds, min(n_distractors + 1, len(ds))) if ds else []
    while len(picked) < n_distractors + 1:
        p = overlap_pick(it.question, pool, it.answers, rng)
        if p is None:
            break
        picked.append(Para(p.title, p.text, False))
    return {"gold": _passages(gold, rng), "mixed": _passages(gold + picked[:n_distractors], rng),
            "none": _passages(picked[:n_distractors + 1], rng)}


def score(answer: str, it: Item) -> tuple[float, float]:
    return exact_match(answer, it.answers), token_f1(answer, it.answers)


def read_settings(items: Sequence[Item], seed: int, settings: tuple[str, ...] = ("gold", "mixed", "none"),
                  pool: list[Para] | None = None) -> Iterator[tuple[Item, str, list[Passage]]]:
    """(item, setting, passages) of every read: the gold passages, gold + 3 distractors, 4 distractors."""
    rng = random.Random(seed)
    every = list(pool or [p for it in items for p in it.gold_paras()])
    for it in items:
        sets = settings_for(it, every, rng)
        for s in settings:
            if sets[s]:
                yield it, s, sets[s]


def read_all(reader: SpanReader, items: list[Item], seed: int, settings: tuple[str, ...] = ("gold", "mixed", "none"),
             pool: list[Para] | None = None, keep: bool = False) -> list[dict[str, Any]]:
    recs = []
    for it, s, ps in read_settings(items, seed, settings, pool):
        r = reader.read(it.question, ps)
        em, f1 = score(r.answer, it) if s != "none" else (0.0, 0.0)
        recs.append({"id": it.id, "dataset": it.dataset, "kind": it.kind, "setting": s, "answer": r.answer,
                     "pred_kind": r.kind, "em": em, "f1": f1, "cited_gold": (r.passage_id or "").startswith("g"),
                     "features": r.features, "ms": r.ms,
                     "n_passages": len(ps), "passages": [[p.id, p.title, p.text] for p in ps] if keep else None})
    return recs


def fit_calibration(recs: list[dict[str, Any]], unanswerable_share: float = 0.25) -> dict[str, Any]:
    """Logistic regression of right (F1 >= 0.5; never on `none`) on the reader's features; the threshold that
    maximises expected F1 over a mix with `unanswerable_share` of unanswerable reads (abstaining there = 1)."""
    from sklearn.linear_model import LogisticRegression

    x = np.array([[r["features"].get(f, 0.0) for f in FEATURES] for r in recs])
    y = np.array([1 if (r["setting"] != "none" and r["f1"] >= RIGHT_F1) else 0 for r in recs])
    if len(set(y.tolist())) < 2:  # an untrained model (a pilot run): nothing to fit, confidence from the score
        coef, icpt = np.array([1.0] + [0.0] * (len(FEATURES) - 1)), 0.0
    else:
        lr = LogisticRegression(C=1.0, max_iter=2000).fit(x, y)
        coef, icpt = lr.coef_[0], float(lr.intercept_[0])
    p = 1.0 / (1.0 + np.exp(-np.clip(x @ coef + icpt, -40, 40)))
    ans = np.array([r["setting"] != "none" for r in recs])
    f1 = np.array([r["f1"] for r in recs])
    w = np.where(ans, (1 - unanswerable_share) / max(ans.sum(), 1), unanswerable_share / max((~ans).sum(), 1))
    best_t, best_u = 0.0, -1.0
    for t in np.linspace(0.0, 0.95, 96):
        keep = p >= t
        u = float((w * np.where(keep, f1, np.where(ans, 0.0, 1.0))).sum())
        if u > best_u:
            best_t, best_u = float(t), u
    keep = p >= best_t
    return {"features": list(FEATURES), "coef": dict(zip(FEATURES, (round(float(c), 5) for c in coef), strict=True)),
            "intercept": round(icpt, 5), "threshold": round(best_t, 3),
            "objective": f"expected F1 over reads of which {unanswerable_share:.0%} have no answer in the passages "
                         "(abstaining there scores 1, on an answerable read 0)",
            "expected_f1_at_threshold": round(best_u, 4),
            "coverage_answerable": round(float(keep[ans].mean()), 4),
            "abstain_rate_unanswerable": round(float((~keep[~ans]).mean()), 4) if (~ans).any() else None,
            "fitted_on": f"{len(recs)} reads of the calibration split (gold, gold+3 distractors, 4 distractors)"}


def summarise(reader: SpanReader, recs: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in recs:
        groups[(r["setting"], r["dataset"])].append(r)
        groups[(r["setting"], "all")].append(r)
    for (s, ds), rs in sorted(groups.items()):
        conf = np.array([reader.confidence(r["features"]) for r in rs])
        answered = conf >= reader.threshold
        row: dict[str, Any] = {"n": len(rs)}
        if s != "none":
            f1 = np.array([r["f1"] for r in rs])
            right = f1 >= RIGHT_F1
            row.update({"em": round(float(np.mean([r["em"] for r in rs])), 4), "f1": round(float(f1.mean()), 4),
                        "cited_gold": round(float(np.mean([r["cited_gold"] for r in rs])), 4),
                        "answered": round(float(answered.mean()), 4),
                        "precision_answered": round(float(right[answered].mean()), 4) if answered.any() else None,
                        "f1_with_abstention": round(float(np.where(answered, f1, 0.0).mean()), 4)})
            yn = [r for r in rs if r["kind"] in ("yes", "no")]
            if yn:
                row["yesno_n"], row["yesno_em"] = len(yn), round(float(np.mean([r["em"] for r in yn])), 4)
        else:
            row["abstained"] = round(float((~answered).mean()), 4)
        out.setdefault(s, {})[ds] = row
    return out


def latency(reader: SpanReader, items: list[Item], n: int = 60, words: int = 600, seed: int = 5) -> dict[str, Any]:
    """5 passages of ~`words` words in all, read on the reader's session (1 thread by default)."""
    rng = random.Random(seed)
    per = max(20, words // 5)
    paras = [p for it in items for p in it.paras if len(p.text.split()) >= per]
    times = []
    sizes = []
    for it in rng.sample(items, min(n, len(items))):
        ps = [Para(p.title, " ".join(p.text.split()[:per]), p.gold) for p in rng.sample(paras, 5)]
        sizes.append(sum(len(p.text.split()) for p in ps))
        t = time.perf_counter()
        reader.read(it.question, [Passage(id=str(i), title=p.title, text=p.text) for i, p in enumerate(ps)])
        times.append((time.perf_counter() - t) * 1000)
    q = np.quantile(times, [0.5, 0.95])
    return {"n": len(times), "p50_ms": round(float(q[0]), 1), "p95_ms": round(float(q[1]), 1),
            "mean_words": round(statistics.mean(sizes)), "threads": 1}


def load_time(directory: Path, repeat: int = 3) -> float:
    best = 1e9
    for _ in range(repeat):
        t = time.perf_counter()
        SpanReader.load(directory, threads=1)
        best = min(best, time.perf_counter() - t)
    return round(best, 3)
