"""Training rows of the citation-support audit from ../shared/data: (question, answer, cited passages,
supported?).

Questions and their candidate pools are the retrieval evaluator's (`learn.evaluator.data.load_pools`:
HotpotQA and MuSiQue with their distractor paragraphs, NQ-open with BM25-hard, answer-free negatives),
less every question the span reader trained on (its probabilities there are not what an unseen question
gets). Per question:
- supported: the gold answer cited to the gold passages (`gold`); for a multi-hop question also to the
  one gold passage holding the answer alone (`gold-one`), as the extractive reader cites;
- unsupported: the gold answer cited to as many non-gold retrieved passages (`distractors`), and a wrong
  answer cited to the gold passages (`wrong`, and `wrong-one` beside `gold-one`). The wrong answer is the
  reader's own best span of the gold passages that does not match a gold alias (F1 < 0.3), the mistakes the
  audit meets at run time; a yes / no question's wrong answer is the other one. Those are the reader's
  favourites, so a wrong answer it does not favour would be missing: `entity` adds one, a named entity or
  number of the gold passages (of the expected answer type when there is one) that matches no gold alias,
  picked by a seeded hash, as an LLM might name the wrong thing the passage mentions.
Splits are by question: a seeded hash of the normalised question (`split_of`), so no question is in two.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from amsrag.audit.features import FEATURE_NAMES, FEATURE_VERSION, audit_features
from amsrag.generate.metrics import exact_match, f1_score, normalize_answer
from amsrag.generate.reader_model import SpanReader
from amsrag.learn.evaluator.data import DataConfig, PoolQuestion, load_pools, pools_sha256, split_of
from amsrag.types import Passage

KINDS = ("gold", "gold-one", "distractors", "wrong", "wrong-one", "entity")
POSITIVE_KINDS = frozenset({"gold", "gold-one"})


@dataclass(frozen=True, slots=True)
class AuditDataConfig:
    seed: int = 13
    per_dataset: int = 2000  # questions per data set before the reader's training questions are dropped
    distractors: int = 6
    nq_negatives: int = 4
    cal_fraction: float = 0.2
    test_fraction: float = 0.3
    candidates: int = 5  # reader spans searched for a wrong answer
    wrong_f1: float = 0.3  # a candidate is wrong below this F1 against every gold alias
    doc_sets: tuple[str, ...] = ()  # documentation sets of `learn.audit.doc_rows` mixed in (none: QA rows only)


@dataclass(slots=True)
class Rows:
    x: np.ndarray  # (n, len(FEATURE_NAMES))
    y: np.ndarray  # 1 supported
    question: np.ndarray  # index into `questions`
    split: np.ndarray
    dataset: np.ndarray
    kind: np.ndarray
    source: np.ndarray  # where the reader features came from
    questions: list[str]
    sha256: str
    stats: dict[str, Any]


def reader_training_questions(data_dir: Path, seed: int = 13) -> set[str]:
    """Normalised questions of the span reader's training split (rebuilt as `amsrag train reader train` split them)."""
    from amsrag.evaluate.builder import held_out_questions
    from amsrag.learn.reader.data import load_all

    items, _ = load_all(data_dir, seed, held_out_questions(data_dir))
    return {" ".join(it.question.lower().split()) for it in items if it.split == "train"}


def answer_of(q: PoolQuestion) -> str:
    """The gold alias as the cited text writes it (the first alias found in a gold passage), else the first."""
    gold = normalize_answer(" ".join(p.text for p in q.paragraphs if p.gold))
    for a in q.answers:
        n = normalize_answer(a)
        if n and f" {n} " in f" {gold} ":
            return a
    return q.answers[0]


def _holder(q: PoolQuestion, answer: str) -> int | None:
    n = normalize_answer(answer)
    for i, p in enumerate(q.paragraphs):
        if p.gold and n and f" {n} " in f" {normalize_answer(p.title + ' ' + p.text)} ":
            return i
    return None


def cited_passages(q: PoolQuestion, idx: list[int]) -> list[Passage]:
    return [Passage(f"p{i}", q.paragraphs[i].text, q.paragraphs[i].title) for i in idx]


def question_rows(q: PoolQuestion, reader: SpanReader, config: AuditDataConfig) -> list[tuple[str, int, Any]]:
    """(kind, label, AuditFeatures) of one question (see the module docstring)."""
    gold = [i for i, p in enumerate(q.paragraphs) if p.gold]
    neg = [i for i, p in enumerate(q.paragraphs) if not p.gold]
    answer = answer_of(q)
    norm = normalize_answer(answer)
    yesno = norm in ("yes", "no")
    flip = ("no" if norm == "yes" else "yes") if yesno else None
    out: list[tuple[str, int, Any]] = []
    cited = cited_passages(q, gold)
    r = reader.answer_support(q.question, cited, [answer] + ([flip] if flip else []), candidates=config.candidates)
    out.append(("gold", 1, audit_features(q.question, answer, cited, q.multi_hop, r.answers[0], r.top_prob)))
    wrong, wrong_support = None, None
    if flip is not None:
        wrong, wrong_support = flip, r.answers[1]
    else:
        for c in r.candidates:
            if not exact_match(c.answer, q.answers) and f1_score(c.answer, q.answers) < config.wrong_f1 \
                    and normalize_answer(c.answer) not in ("yes", "no"):
                wrong, wrong_support = c.answer, c
                break
    if wrong is not None:
        out.append(("wrong", 0, audit_features(q.question, wrong, cited, q.multi_hop, wrong_support, r.top_prob)))
    if neg:
        dis = cited_passages(q, neg[: max(1, len(gold))])
        rd = reader.answer_support(q.question, dis, [answer])
        out.append(("distractors", 0, audit_features(q.question, answer, dis, q.multi_hop, rd.answers[0],
                                                     rd.top_prob)))
    holder = _holder(q, answer)
    if q.multi_hop and len(gold) >= 2 and holder is not None:
        one = cited_passages(q, [holder])
        asked = [answer] + ([wrong] if wrong is not None else [])
        ro = reader.answer_support(q.question, one, asked)
        out.append(("gold-one", 1, audit_features(q.question, answer, one, True, ro.answers[0], ro.top_prob)))
        if wrong is not None:
            out.append(("wrong-one", 0, audit_features(q.question, wrong, one, True, ro.answers[1], ro.top_prob)))
    return out


def entity_answer(q: PoolQuestion, seed: int, wrong_f1: float) -> str | None:
    """A named entity or number of the gold passages that is not the answer (seeded; expected type first)."""
    from amsrag.correct.text import ANSWER_TYPES, answer_type
    from amsrag.indexes.entities import ner_pipeline
    from amsrag.learn.common import seeded_rank

    texts = [p.text for p in q.paragraphs if p.gold]
    found: dict[str, str] = {}
    for doc in ner_pipeline().pipe(texts):
        for e in doc.ents:
            text = " ".join(e.text.split()).strip(" ,.;:")
            if text and not exact_match(text, q.answers) and f1_score(text, q.answers) < wrong_f1:
                found.setdefault(text, e.label_)
    if not found:
        return None
    wanted = ANSWER_TYPES.get(answer_type(q.question), frozenset())
    typed = [t for t, label in found.items() if label in wanted] or list(found)
    return min(typed, key=lambda t: seeded_rank(seed, q.key + "\x1f" + t))


def entity_rows(q: PoolQuestion, reader: SpanReader, config: AuditDataConfig) -> list[tuple[str, int, Any]]:
    """The `entity` row of one question (none when its gold passages name nothing else)."""
    wrong = entity_answer(q, config.seed, config.wrong_f1)
    if wrong is None or normalize_answer(answer_of(q)) in ("yes", "no"):
        return []
    cited = cited_passages(q, [i for i, p in enumerate(q.paragraphs) if p.gold])
    r = reader.answer_support(q.question, cited, [wrong])
    return [("entity", 0, audit_features(q.question, wrong, cited, q.multi_hop, r.answers[0], r.top_prob))]


def _sha(pools: list[PoolQuestion], config: AuditDataConfig, reader_card: dict[str, Any]) -> str:
    h = hashlib.sha256()
    settings = {k: v for k, v in asdict(config).items() if k != "doc_sets"}  # the QA rows do not depend on them
    h.update(json.dumps(settings, sort_keys=True).encode())
    h.update(pools_sha256(pools, DataConfig(config.seed, config.per_dataset, config.distractors,
                                            config.nq_negatives)).encode())
    h.update(f"features-{FEATURE_VERSION}|{','.join(FEATURE_NAMES)}".encode())
    h.update(json.dumps(reader_card.get("calibration", {}), sort_keys=True).encode())
    h.update(str(reader_card.get("export", "")).encode())
    for q in pools:
        h.update(f"{q.key}\x1f{q.split}".encode())
    return h.hexdigest()


def load_pools_for(data_dir: Path, config: AuditDataConfig) -> tuple[list[PoolQuestion], dict[str, Any]]:
    """The audit's questions with their pools and splits (the span reader's training questions left out)."""
    data_dir = Path(data_dir)
    pools = load_pools(data_dir, DataConfig(config.seed, config.per_dataset, config.distractors,
                                            config.nq_negatives))
    seen_by_reader = reader_training_questions(data_dir, config.seed)
    loaded = len(pools)
    pools = [q for q in pools if " ".join(q.question.lower().split()) not in seen_by_reader and q.answers]
    for q in pools:
        q.split = split_of(q.question, config.seed, config.cal_fraction, config.test_fraction)
    return pools, {"questions_loaded": loaded, "questions_kept": len(pools),
                   "dropped_reader_training": loaded - len(pools)}


def build_rows(data_dir: Path, config: AuditDataConfig, reader: SpanReader, cache_dir: Path | None = None,
               progress: Callable[[int, int], None] | None = None, docs_dir: Path | None = None) -> Rows:
    """Every training row, with features; the QA rows cached (by a sha256 of the data, the settings, the
    feature spec and the reader's card) as an npz in `cache_dir`; then the rows of `config.doc_sets` (their
    folders under `docs_dir`), in the splits of their sets."""
    pools, stats = load_pools_for(data_dir, config)
    sha = _sha(pools, config, reader.card)
    cache = Path(cache_dir) / f"audit-rows-{sha[:20]}.npz" if cache_dir is not None else None
    base = _rows(pools, question_rows, reader, config, sha, stats, cache, progress)
    extra_cache = cache.with_name(cache.name.replace("audit-rows-", "audit-entity-rows-")) if cache else None
    extra = _rows(pools, entity_rows, reader, config, sha, stats, extra_cache, progress)
    rows = Rows(np.concatenate([base.x, extra.x]), np.concatenate([base.y, extra.y]),
                np.concatenate([base.question, extra.question]), np.concatenate([base.split, extra.split]),
                np.concatenate([base.dataset, extra.dataset]), np.concatenate([base.kind, extra.kind]),
                np.concatenate([base.source, extra.source]), base.questions,
                hashlib.sha256(f"{sha}|entity-1".encode()).hexdigest(), stats)
    if not config.doc_sets:
        return rows
    if docs_dir is None:
        raise ValueError("documentation rows asked for (doc_sets) without the folder of the documentation corpora")
    return with_doc_rows(rows, docs_dir, config, reader)


def with_doc_rows(rows: Rows, docs_dir: Path, config: AuditDataConfig, reader: SpanReader) -> Rows:
    """`rows` and the documentation rows of `config.doc_sets` after them (their questions numbered after
    `rows.questions`); the sha256 covers each set's files and the documentation rows' settings."""
    from amsrag.learn.audit.doc_rows import build_doc_rows, doc_set

    doc = build_doc_rows(docs_dir, [doc_set(n) for n in config.doc_sets], reader, config.seed, config.candidates,
                         config.wrong_f1)
    h = hashlib.sha256(f"{rows.sha256}|docs-1".encode())
    for name, info in doc.sets.items():
        h.update(f"|{name}:{info['split']}:{info['sha256']}".encode())
    return Rows(np.concatenate([rows.x, doc.x]), np.concatenate([rows.y, doc.y]),
                np.concatenate([rows.question, doc.question + len(rows.questions)]),
                np.concatenate([rows.split, doc.split]), np.concatenate([rows.dataset, doc.dataset]),
                np.concatenate([rows.kind, doc.kind]), np.concatenate([rows.source, doc.source]),
                rows.questions + doc.questions, h.hexdigest(), {**rows.stats, "doc_sets": doc.sets})


def _rows(pools: list[PoolQuestion], make: Callable[[PoolQuestion, SpanReader, AuditDataConfig], list[Any]],
          reader: SpanReader, config: AuditDataConfig, sha: str, stats: dict[str, Any], cache: Path | None,
          progress: Callable[[int, int], None] | None) -> Rows:
    questions = [q.question for q in pools]
    if cache is not None and cache.is_file():
        with np.load(cache, allow_pickle=False) as z:
            return Rows(z["x"], z["y"], z["question"], z["split"], z["dataset"], z["kind"], z["source"], questions,
                        sha, stats)
    xs, ys, qi, splits, dsets, kinds, sources = [], [], [], [], [], [], []
    for n, q in enumerate(pools):
        for kind, label, feats in make(q, reader, config):
            xs.append(feats.values)
            ys.append(label)
            qi.append(n)
            splits.append(q.split)
            dsets.append(q.dataset)
            kinds.append(kind)
            sources.append(feats.source)
        if progress is not None:
            progress(n + 1, len(pools))
    rows = Rows(np.vstack(xs), np.array(ys, dtype=np.int64), np.array(qi, dtype=np.int64), np.array(splits),
                np.array(dsets), np.array(kinds), np.array(sources), questions, sha, stats)
    if cache is not None:
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_suffix(".tmp.npz")
        np.savez(tmp, x=rows.x, y=rows.y, question=rows.question, split=rows.split, dataset=rows.dataset,
                 kind=rows.kind, source=rows.source)
        tmp.replace(cache)
    return rows
