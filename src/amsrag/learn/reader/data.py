"""Reader training data from ../shared/data: items (question, answers, passages with gold flags), splits, windows.

Splits are by question (SQuAD by article, or by paragraph where there is no article), seeded and
deterministic; every question of the default evaluation benchmark and of the demo is left out.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections import Counter, defaultdict
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from amsrag.artifacts import file_sha256
from amsrag.generate.metrics import normalize_answer
from amsrag.generate.reader_windows import JOINT_SEP, WindowMaker, context_of
from amsrag.ingest.dataset_facts import READER_FILES
from amsrag.ingest.readers import iter_jsonl, read_json

SQUAD_FILES = READER_FILES["squad"]
NQ_FILES = READER_FILES["nq"]
HOTPOT_FILES = READER_FILES["hotpotqa"]
MUSIQUE_FILES = READER_FILES["musique"]
ALL_FILES = SQUAD_FILES + NQ_FILES + HOTPOT_FILES + MUSIQUE_FILES
SPLIT_FRACTIONS = {"test": 0.15, "cal": 0.10}  # the rest trains


def qkey(question: str) -> str:
    return " ".join(question.lower().split())


@dataclass
class Para:
    title: str
    text: str
    gold: bool


@dataclass
class Item:
    id: str
    dataset: str
    question: str
    answers: list[str]
    paras: list[Para]  # in source order; `gold` flags the supporting ones
    group: str = ""  # the unit of the split (SQuAD article / paragraph; else the question)
    qtype: str = ""
    kind: str = "span"  # span | yes | no
    answer_para: int = -1  # index of the paragraph holding the answer's first occurrence
    answer_char: tuple[int, int] = (-1, -1)  # in context_of(title, text) of that paragraph
    split: str = "train"
    meta: dict[str, Any] = field(default_factory=dict)

    def gold_paras(self) -> list[Para]:
        return [p for p in self.paras if p.gold]

    def distractors(self) -> list[Para]:
        return [p for p in self.paras if not p.gold]


def _jsonl(path: Path) -> Iterator[dict[str, Any]]:
    return (row for _, row in iter_jsonl(path))


def _rows(path: Path) -> list[dict[str, Any]]:
    if path.suffix == ".json":
        d = read_json(path)
        return d if isinstance(d, list) else d["data"]
    return list(_jsonl(path))


def load_squad(data: Path) -> list[Item]:
    items = []
    d = json.loads((data / SQUAD_FILES[0]).read_text(encoding="utf-8"))["data"]
    for art in d:
        for par in art["paragraphs"]:
            for qa in par["qas"]:
                answers = list(dict.fromkeys(a["text"] for a in qa["answers"]))
                paras = [Para(art["title"], par["context"], True)]
                items.append(Item(qa["id"], "squad", qa["question"], answers, paras, group="a:" + art["title"]))
    for i, r in enumerate(json.loads((data / SQUAD_FILES[1]).read_text(encoding="utf-8"))):
        ans = r["answer"] if isinstance(r["answer"], list) else [r["answer"]]
        ctx = r["context"]
        items.append(Item(f"routerlens:{i}", "squad", r["question"], [str(a) for a in ans], [Para("", ctx, True)],
                          group="p:" + hashlib.sha1(ctx.encode()).hexdigest()[:12]))
    return items


def load_nq(data: Path) -> list[Item]:
    items = []
    for i, r in enumerate(_jsonl(data / NQ_FILES[0])):
        c = r["ctxs"][0]
        paras = [Para(c.get("title", ""), c["text"], True)]
        items.append(Item(f"nq:{i}", "nq", r["question"], list(r["answers"]), paras))
    return items


def _hotpot_row(r: dict[str, Any]) -> Item | None:
    if "question_text" in r:  # ircot
        paras = [Para(c["title"], c["paragraph_text"], bool(c["is_supporting"])) for c in r["contexts"]]
        answers = [s for a in r["answers_objects"] for s in a["spans"]]
        return Item(r["question_id"], "hotpotqa", r["question_text"], answers, paras)
    ctx, sf = r["context"], r["supporting_facts"]
    if isinstance(ctx, dict):  # Hugging Face layout
        pairs = list(zip(ctx["title"], ctx["sentences"], strict=True))
        gold_titles = set(sf["title"])
    else:
        pairs = [(t, s) for t, s in ctx]
        gold_titles = {t for t, _ in sf}
    paras = [Para(t, "".join(s), t in gold_titles) for t, s in pairs]
    return Item(str(r.get("id") or r.get("_id")), "hotpotqa", r["question"], [r["answer"]], paras,
                qtype=str(r.get("type", "")))


def load_hotpot(data: Path) -> list[Item]:
    seen: set[str] = set()
    items = []
    for f in HOTPOT_FILES:
        for r in _rows(data / f):
            it = _hotpot_row(r)
            if it is None or qkey(it.question) in seen or it.id in seen:
                continue
            seen.update({qkey(it.question), it.id})
            items.append(it)
    return items


def load_musique(data: Path) -> list[Item]:
    seen: set[str] = set()
    items = []
    for f in MUSIQUE_FILES:
        for r in _rows(data / f):
            if qkey(r["question"]) in seen:
                continue
            seen.add(qkey(r["question"]))
            paras = [Para(p["title"], p["paragraph_text"], bool(p["is_supporting"])) for p in r["paragraphs"]]
            answers = [r["answer"], *r.get("answer_aliases", [])]
            items.append(Item(r["id"], "musique", r["question"], answers, paras, qtype=r["id"].split("__")[0]))
    return items


_WS = re.compile(r"\s+")


def find_answer(context: str, answers: list[str]) -> tuple[int, int] | None:
    """First occurrence of any answer in the context: case-insensitive, then with normalised whitespace and
    punctuation-insensitive token match (SQuAD normalisation) as a fallback."""
    low = context.lower()
    best: tuple[int, int] | None = None
    for a in answers:
        a = a.strip()
        if not a:
            continue
        k = low.find(a.lower())
        if k >= 0 and (best is None or k < best[0]):
            best = (k, k + len(a))
    if best is not None:
        return best
    toks = [(m.start(), m.end(), normalize_answer(m.group())) for m in re.finditer(r"\S+", context)]
    for a in answers:
        target = normalize_answer(a).split()
        if not target:
            continue
        n = len(target)
        words = [(s, e, w) for s, e, w in toks if w]
        for i in range(len(words) - n + 1):
            if [w for _, _, w in words[i:i + n]] == target:
                return words[i][0], words[i + n - 1][1]
    return None


def label(items: list[Item]) -> Counter[str]:
    """Kind and the answer's first occurrence in a supporting passage; drops what cannot be labelled."""
    drops: Counter[str] = Counter()
    for it in items:
        norm = {normalize_answer(a) for a in it.answers}
        if norm & {"yes", "no"} and it.dataset == "hotpotqa":
            it.kind = "yes" if "yes" in norm else "no"
            continue
        for i, p in enumerate(it.paras):
            if not p.gold:
                continue
            hit = find_answer(context_of(p.title, p.text), it.answers)
            if hit is not None:
                it.answer_para, it.answer_char = i, hit
                break
        if it.answer_para < 0:
            drops[it.dataset] += 1
    return drops


def split(items: list[Item], seed: int) -> None:
    """Assign test / cal / train by group (SQuAD article or paragraph, else the question), per dataset."""
    by_ds: dict[str, list[Item]] = defaultdict(list)
    for it in items:
        if not it.group:
            it.group = "q:" + it.id
        by_ds[it.dataset].append(it)
    for ds, its in sorted(by_ds.items()):
        groups = sorted({it.group for it in its})
        random.Random(f"{seed}:{ds}").shuffle(groups)
        sizes = Counter(it.group for it in its)
        total, acc, where = len(its), 0, {}
        for g in groups:
            frac = acc / total
            where[g] = "test" if frac < SPLIT_FRACTIONS["test"] else (
                "cal" if frac < SPLIT_FRACTIONS["test"] + SPLIT_FRACTIONS["cal"] else "train")
            acc += sizes[g]
        for it in its:
            it.split = where[it.group]


def load_all(data: Path, seed: int = 13, exclude: Collection[str] = ()) -> tuple[list[Item], dict[str, Any]]:
    """Every labelled item of the reader's data, split by group. `exclude`: questions no split may hold
    (the evaluation benchmark's and the demo's: the caller gathers them)."""
    data = Path(data)
    items = load_squad(data) + load_nq(data) + load_hotpot(data) + load_musique(data)
    stats: dict[str, Any] = {"loaded": dict(Counter(it.dataset for it in items))}
    if exclude:
        ex = {qkey(q) for q in exclude}
        before = Counter(it.dataset for it in items)
        items = [it for it in items if qkey(it.question) not in ex]
        stats["excluded_benchmark_demo"] = {k: before[k] - v for k, v in Counter(it.dataset for it in items).items()}
    # the same question twice (SQuAD's two files overlap): keep the first
    seen: set[str] = set()
    uniq = []
    for it in items:
        k = it.dataset + "|" + qkey(it.question)
        if k not in seen:
            seen.add(k)
            uniq.append(it)
    items = uniq
    stats["unlabelled_dropped"] = dict(label(items))
    items = [it for it in items if it.kind != "span" or it.answer_para >= 0]
    split(items, seed)
    stats["items"] = {s: dict(Counter(it.dataset for it in items if it.split == s)) for s in ("train", "cal", "test")}
    stats["kinds"] = dict(Counter(it.kind for it in items))
    stats["files"] = {f: file_sha256(data / f) for f in ALL_FILES}
    return items, stats


# -- training windows ------------------------------------------------------------------------------------
@dataclass
class TrainWindow:
    ids: list[int]
    type_ids: list[int]
    start: int  # token position in ids (0 = [CLS]: no answer here)
    end: int
    kind: int  # 0 span, 1 yes, 2 no
    dataset: str
    negative: bool


def overlap_pick(question: str, pool: list[Para], answers: list[str], rng: random.Random, n: int = 30) -> Para | None:
    """A hard-ish negative: of n random paragraphs, the one sharing most question words, without the answer."""
    qw = set(normalize_answer(question).split())
    best, best_s = None, -1
    for p in rng.sample(pool, min(n, len(pool))):
        if find_answer(context_of(p.title, p.text), answers) is not None:
            continue
        s = len(qw & set(normalize_answer(p.text).split()))
        if s > best_s:
            best, best_s = p, s
    return best


def train_windows(items: list[Item], maker: WindowMaker, seed: int, joint_tokens: int = 384,
                  neg_rate: dict[str, float] | None = None) -> tuple[list[TrainWindow], dict[str, Any]]:
    """Answer windows, no-answer windows (other windows of long passages, distractors, bridge paragraphs of
    multi-hop questions, hard negatives for single-hop ones) and joint multi-hop contexts."""
    rng = random.Random(seed)
    neg_rate = neg_rate or {"squad": 0.3, "nq": 0.5, "hotpotqa": 2.0, "musique": 3.0}
    pools: dict[str, list[Para]] = defaultdict(list)
    by_article: dict[str, list[Para]] = defaultdict(list)
    for it in items:
        pools[it.dataset] += it.gold_paras()
        if it.group.startswith("a:"):
            by_article[it.group] += it.gold_paras()
    for k in by_article:  # one paragraph object per text
        by_article[k] = list({p.text: p for p in by_article[k]}.values())
    pools = {k: list({p.text: p for p in v}.values()) for k, v in pools.items()}
    out: list[TrainWindow] = []
    kind_id = {"span": 0, "yes": 1, "no": 2}

    def add(it: Item, ctx: str, answer: tuple[int, int] | None, negative: bool, max_len: int | None = None,
            keep_neg: int = 2) -> None:
        q = maker.question_ids(it.question)
        (ids, offs), = maker.encode_contexts([ctx])
        ws = maker.windows(q, ids, offs, 0, max_len)
        negs = []
        for w in ws:
            st = en = 0
            if answer is not None:
                a, b = answer
                si = [i for i, o in enumerate(w.offsets) if o[0] <= a < o[1] or (o[0] >= a and o[0] < b)]
                ei = [i for i, o in enumerate(w.offsets) if o[0] < b <= o[1] or (o[1] <= b and o[1] > a)]
                if si and ei and w.offsets[si[0]][0] <= a + 1 and w.offsets[ei[-1]][1] >= b - 1:
                    st, en = w.ctx_start + si[0], w.ctx_start + ei[-1]
            tw = TrainWindow(w.ids, w.type_ids, st, en, kind_id[it.kind], it.dataset, negative or st == 0)
            if st == 0 and it.kind == "span":
                negs.append(tw)
            else:
                out.append(tw)
        out.extend(negs[:keep_neg])

    counts: Counter[str] = Counter()
    for it in items:
        if it.split != "train":
            continue
        golds = [i for i, p in enumerate(it.paras) if p.gold]
        for i in golds:
            p = it.paras[i]
            ans = it.answer_char if i == it.answer_para else None
            add(it, context_of(p.title, p.text), ans, ans is None and it.kind == "span")
        rate = neg_rate.get(it.dataset, 0.0)
        n_neg = int(rate) + (1 if rng.random() < rate - int(rate) else 0)
        cands = it.distractors()
        if not cands and it.group.startswith("a:"):
            cands = [p for p in by_article[it.group] if p.text != it.paras[0].text]
            cands = [p for p in cands if find_answer(context_of(p.title, p.text), it.answers) is None]
        for _ in range(n_neg):
            picked = rng.choice(cands) if cands else overlap_pick(it.question, pools[it.dataset], it.answers, rng)
            if picked is None:
                continue
            p = picked
            if cands:
                cands = [c for c in cands if c is not p]
            add(it, context_of(p.title, p.text), None, True, keep_neg=1)
            counts["negative_passages"] += 1
        if len(golds) >= 2 and it.dataset in ("hotpotqa", "musique"):
            order = golds[:]
            rng.shuffle(order)
            ctxs = [context_of(it.paras[i].title, it.paras[i].text) for i in order]
            joint = JOINT_SEP.join(ctxs)
            q = maker.question_ids(it.question)
            (ids, _), = maker.encode_contexts([joint])
            if maker.fits(q, len(ids), joint_tokens):
                ans = None
                if it.answer_para >= 0:
                    pos = sum(len(c) + len(JOINT_SEP) for c in ctxs[:order.index(it.answer_para)])
                    ans = (pos + it.answer_char[0], pos + it.answer_char[1])
                add(it, joint, ans, False, joint_tokens)
                counts["joint_windows"] += 1
    counts.update(("windows_" + ("neg" if w.negative else "pos")) for w in out)
    counts.update(("windows_" + w.dataset) for w in out)
    return out, dict(counts)
