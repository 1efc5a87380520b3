"""Training windows for the Chinese reader from CMRC 2018's train split (gold paragraph, answer position).

CMRC's files give each answer's `answer_start`; `amsrag.ingest.cmrc` keeps the answer strings only, so the
positions are read from the raw train file (a start that does not point at its answer falls back to the
answer's first occurrence; a question whose answer is not in its paragraph is dropped and counted).
Windows are cut exactly as the reader cuts them at run time; a question gives one window holding its
answer (chosen at random when several do) and, with probability `neg_rate`, one window without it, whose
label is the `<s>` token (no answer in this window).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from amsrag.generate.zh_reader import MAX_QUESTION_CHARS, ZhTokenizer, make_windows
from amsrag.ingest.cmrc import TRAIN_FILE, Cmrc

MAX_ANSWER_TOKENS = 64  # longer answers are dropped from training (counted)


@dataclass(frozen=True, slots=True)
class TrainWindow:
    ids: list[int]
    start: int  # token index in `ids` (0: no answer in this window)
    end: int


def answer_starts(data: Path) -> dict[str, list[tuple[str, int]]]:
    """question id → [(answer text, answer_start)] from the raw CMRC train file."""
    raw: dict[str, Any] = json.loads((data / TRAIN_FILE).read_text(encoding="utf-8"))
    out: dict[str, list[tuple[str, int]]] = {}
    for art in raw["data"]:
        for para in art["paragraphs"]:
            for qa in para["qas"]:
                out[str(qa["id"])] = [(str(a["text"]).strip(), int(a.get("answer_start", -1)))
                                      for a in qa.get("answers", []) if a.get("text")]
    return out


def locate(context: str, answer: str, start: int) -> int:
    """The answer's char start in `context` (`start` when it points at it, else the first occurrence; -1)."""
    if start >= 0 and context[start:start + len(answer)] == answer:
        return start
    for shift in (-1, 1, -2, 2):
        s = start + shift
        if s >= 0 and context[s:s + len(answer)] == answer:
            return s
    return context.find(answer)


def train_windows(cmrc: Cmrc, data: Path, tok: ZhTokenizer, max_len: int, stride: int, max_question: int,
                  neg_rate: float, seed: int) -> tuple[list[TrainWindow], dict[str, int]]:
    rng = random.Random(seed)
    starts = answer_starts(data)
    questions = cmrc.split("train")
    paras = {p.id: p for p in cmrc.paragraphs}
    pids = sorted({q.paragraph_id for q in questions})
    enc = dict(zip(pids, tok.encode_batch([paras[p].context for p in pids]), strict=True))
    q_enc = tok.encode_batch([q.question[:MAX_QUESTION_CHARS] for q in questions])
    out: list[TrainWindow] = []
    stats = {"questions": len(questions), "dropped_no_answer": 0, "dropped_answer_too_long": 0, "positive": 0,
             "negative": 0}
    for q, (q_ids, _) in zip(questions, q_enc, strict=True):
        ctx = paras[q.paragraph_id].context
        ans = starts.get(q.id) or [(a, -1) for a in q.answers]
        text, a0 = ans[0]
        a = locate(ctx, text, a0)
        if a < 0:
            stats["dropped_no_answer"] += 1
            continue
        b = a + len(text)
        ids, offs = enc[q.paragraph_id]
        t0 = next((i for i, (s, e) in enumerate(offs) if e > a), None)
        t1 = next((i for i in range(len(offs) - 1, -1, -1) if offs[i][0] < b), None)
        if t0 is None or t1 is None or t1 < t0:
            stats["dropped_no_answer"] += 1
            continue
        if t1 - t0 + 1 > MAX_ANSWER_TOKENS:
            stats["dropped_answer_too_long"] += 1
            continue
        ws = make_windows(q_ids[:max_question], ids, offs, 0, max_len, stride)
        room = len(ws[0].offsets)
        step = max(16, room - stride)
        pos, neg = [], []
        for k, w in enumerate(ws):
            lo = k * step
            if lo <= t0 and t1 < lo + len(w.offsets):
                pos.append(TrainWindow(w.ids, w.ctx_start + t0 - lo, w.ctx_start + t1 - lo))
            elif not (lo <= t1 and t0 < lo + len(w.offsets)):
                neg.append(TrainWindow(w.ids, 0, 0))
        if pos:
            out.append(rng.choice(pos))
            stats["positive"] += 1
        if neg and rng.random() < neg_rate:
            out.append(rng.choice(neg))
            stats["negative"] += 1
    return out, stats
