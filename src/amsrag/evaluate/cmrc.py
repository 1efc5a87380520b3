"""CMRC 2018 as amsrag's Chinese benchmark: retrieval over its 2,827 paragraphs, and answers.

The index holds every paragraph of the train and dev files (`ingest.cmrc`), built with the Chinese
settings (`chinese_config`: the multilingual encoder; BM25's jieba words + bigrams are the default). The
test questions are asked of it: each retriever alone and the `full` system (nDCG@5, Recall@5 against the
question's paragraph), and answers by `full` with the engine's reader for Chinese, scored in characters as
CMRC does (EM, F1). The baseline rows are today's tokenizer (BM25 with one token per run of Han characters)
and the English encoder.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from amsrag.config import AmsragConfig
from amsrag.evaluate.metrics import ndcg_at, recall_at
from amsrag.indexes.bm25 import BM25Index
from amsrag.ingest.cmrc import Cmrc, CmrcQuestion, load_cmrc
from amsrag.retrievers import retriever_for
from amsrag.types import Passage, PassageRow

K = 5
RETRIEVERS = ("bm25", "dense", "graph")
CHINESE_ENCODER = "multilingual-e5-small-q4"


def chinese_config(embedding_model: str = CHINESE_ENCODER) -> AmsragConfig:
    """The settings of an index of Chinese documents: the multilingual encoder (BM25 segments Chinese by
    default)."""
    config = AmsragConfig()
    return config.model_copy(update={"embedding": config.embedding.model_copy(update={"model": embedding_model})})


def cmrc_passages(cmrc: Cmrc) -> list[Passage]:
    return [Passage(id=p.id, text=p.context, title=p.title, doc_id=p.id, metadata={"source": "cmrc2018"})
            for p in cmrc.paragraphs]


def sample(questions: Sequence[CmrcQuestion], limit: int | None, seed: int) -> list[CmrcQuestion]:
    if limit is None or limit >= len(questions):
        return list(questions)
    return sorted(random.Random(seed).sample(list(questions), limit), key=lambda q: q.id)


@dataclass(frozen=True, slots=True)
class RetrievalRow:
    system: str
    ndcg: float
    recall: float
    ms_p50: float
    n: int

    def to_dict(self) -> dict[str, Any]:
        return {"system": self.system, "ndcg@5": round(self.ndcg, 4), "recall@5": round(self.recall, 4),
                "ms_p50": round(self.ms_p50, 2), "n": self.n}


def _row(system: str, ranked: Sequence[Sequence[str]], golds: Sequence[str], ms: Sequence[float]) -> RetrievalRow:
    ndcg = float(np.mean([ndcg_at(r, [g], K) for r, g in zip(ranked, golds, strict=True)]))
    recall = float(np.mean([recall_at(r, [g], K) for r, g in zip(ranked, golds, strict=True)]))
    return RetrievalRow(system, ndcg, recall, float(np.median(ms)), len(golds))


def bm25_rows(cmrc: Cmrc, questions: Sequence[CmrcQuestion]) -> list[RetrievalRow]:
    """BM25 alone with today's tokenizer (`cjk = "none"`) and each Chinese mode, without an index."""
    rows = [PassageRow(i, p.id, p.title, p.context) for i, p in enumerate(cmrc.paragraphs)]
    ids = [p.id for p in cmrc.paragraphs]
    out = []
    base = AmsragConfig().bm25
    for mode in ("none", "bigram", "jieba", "jieba+bigram"):
        index = BM25Index.build(rows, base.model_copy(update={"cjk": mode}))
        ranked, ms = [], []
        for q in questions:
            t = time.perf_counter()
            scores = index.scores(q.question)
            top = np.argsort(-scores, kind="stable")[:K]
            ms.append((time.perf_counter() - t) * 1000)
            ranked.append([ids[i] for i in top if scores[i] > 0])
        out.append(_row(f"bm25 (cjk={mode})", ranked, [q.paragraph_id for q in questions], ms))
    return out


def engine_rows(engine: Any, questions: Sequence[CmrcQuestion], systems: Sequence[str] = ("full",),
                log: Callable[[str], None] = print) -> list[RetrievalRow]:
    """Each retriever alone and each system, over the engine's index (one query embedding per question)."""
    vectors = [engine.index.encoder.encode_query(q.question) for q in questions]
    golds = [q.paragraph_id for q in questions]
    out = []
    for name in RETRIEVERS:
        retriever = retriever_for(engine.index, name)
        ranked, ms = [], []
        for q, v in zip(questions, vectors, strict=True):
            t = time.perf_counter()
            ranked.append([h.id for h in retriever.search(q.question, K, v)])
            ms.append((time.perf_counter() - t) * 1000)
        out.append(_row(name, ranked, golds, ms))
        log(f"  cmrc {name}: nDCG@5 {out[-1].ndcg:.3f}")
    for system in systems:
        ranked, ms = [], []
        for q, v in zip(questions, vectors, strict=True):
            t = time.perf_counter()
            result = engine.retrieve(q.question, system=system, query_vector=v)
            ms.append((time.perf_counter() - t) * 1000)
            ranked.append([p.id for p in result.passages])
        out.append(_row(system, ranked, golds, ms))
        log(f"  cmrc {system}: nDCG@5 {out[-1].ndcg:.3f}")
    return out


def load(data_dir: Path) -> Cmrc:
    return load_cmrc(data_dir)


@dataclass(frozen=True, slots=True)
class AnswerRow:
    system: str
    em: float
    f1: float
    answered: float  # share not abstained
    cites_gold: float  # share citing the question's paragraph
    ms_p50: float
    n: int

    def to_dict(self) -> dict[str, Any]:
        return {"system": self.system, "em": round(self.em, 4), "f1": round(self.f1, 4),
                "answered": round(self.answered, 4), "cites_gold": round(self.cites_gold, 4),
                "ms_p50": round(self.ms_p50, 1), "n": self.n}


def answer_rows(engine: Any, questions: Sequence[CmrcQuestion], systems: Sequence[str] = ("full",),
                log: Callable[[str], None] = print) -> list[AnswerRow]:
    """`amsrag ask` on each question (the engine picks its reader for Chinese), scored in characters."""
    from amsrag.generate.zh_metrics import char_em, char_f1

    out: list[AnswerRow] = []
    if not questions:
        return out
    for system in systems:
        em = f1 = answered = cites = 0.0
        ms: list[float] = []
        for i, q in enumerate(questions):
            a = engine.ask(q.question, system=system)
            em += char_em(a.answer, list(q.answers))
            f1 += char_f1(a.answer, list(q.answers))
            answered += not a.abstained
            cites += q.paragraph_id in a.citations
            ms.append(float(a.trace.timings["total"]))
            if (i + 1) % 100 == 0:
                log(f"  cmrc answers {system}: {i + 1}/{len(questions)}")
        n = len(questions)
        out.append(AnswerRow(system, em / n, f1 / n, answered / n, cites / n, float(np.median(ms)), n))
    return out


def run_cmrc(data_dir: Path, cache: Path, seed: int = 13, limit: int | None = None,
             answer_limit: int | None = None, embedding_model: str = CHINESE_ENCODER,
             log: Callable[[str], None] = print, split: Literal["test", "cal"] = "test") -> dict[str, Any]:
    """The whole benchmark: BM25 by tokenizer, the engine's retrievers and `full`, answers by `full`, on the
    `split` questions (test; cal for choosing settings)."""
    from amsrag.evaluate.corpus_index import open_or_build_index
    from amsrag.pipeline import Engine
    from amsrag.store.open import open_index

    t0 = time.perf_counter()
    cmrc = load(data_dir)
    if split not in ("test", "cal"):
        raise ValueError(f"split must be test or cal, got {split!r}")
    questions = sample(cmrc.split(split), limit, seed)
    log(f"cmrc: {len(cmrc.paragraphs)} paragraphs, {len(questions)} test questions")
    bm25 = bm25_rows(cmrc, questions)
    config = chinese_config(embedding_model)
    index_dir = cache / f"cmrc-index-{embedding_model}"
    index = open_or_build_index(cmrc_passages(cmrc), index_dir, cache, config)
    with Engine(index) as engine:
        retrieval = engine_rows(engine, questions, log=log)
        answers = answer_rows(engine, sample(questions, answer_limit, seed), log=log)
    # The router without its override for questions the classifier cannot read (`router.blind_strategy`).
    second = open_index(index_dir)
    allowed = second.config.router.model_copy(update={"blind_strategy": "A"})
    with Engine(second, config=second.config.model_copy(update={"router": allowed})) as base:
        vectors = [base.index.encoder.encode_query(q.question) for q in questions]
        ranked, ms = [], []
        for q, v in zip(questions, vectors, strict=True):
            t = time.perf_counter()
            ranked.append([p.id for p in base.retrieve(q.question, system="full", query_vector=v).passages])
            ms.append((time.perf_counter() - t) * 1000)
    retrieval.append(_row("full, Strategy A allowed when blind", ranked, [q.paragraph_id for q in questions], ms))
    log(f"  cmrc {retrieval[-1].system}: nDCG@5 {retrieval[-1].ndcg:.3f}")
    descriptions = {"test": "test (dev articles at odd positions)", "cal": "cal (dev articles at even positions)"}
    return {"data": [f"cmrc2018/{name}" for name in ("cmrc2018_train.json", "cmrc2018_dev_even.json")],
            "split": descriptions[split], "paragraphs": len(cmrc.paragraphs),
            "questions": len(questions), "embedding_model": embedding_model, "bm25_cjk": config.bm25.cjk,
            "bm25_by_tokenizer": [r.to_dict() for r in bm25], "retrieval": [r.to_dict() for r in retrieval],
            "answers": [r.to_dict() for r in answers], "seconds": round(time.perf_counter() - t0, 1)}


def markdown(result: dict[str, Any]) -> list[str]:
    lines = ["## Chinese: CMRC 2018", "",
             f"{result['questions']} held-out questions ({result['split']}) over all {result['paragraphs']:,} "
             f"paragraphs of {' and '.join(result['data'])}; dense encoder {result['embedding_model']}, BM25 "
             f"tokenizer {result['bm25_cjk']}. Gold: the question's paragraph. Answers in characters (CMRC's "
             "EM and F1: punctuation and spaces out, max over the reference answers).", "",
             "| retrieval | nDCG@5 | Recall@5 | p50 ms |", "|---|---:|---:|---:|"]
    for r in result["bm25_by_tokenizer"] + result["retrieval"]:
        lines.append(f"| {r['system']} | {r['ndcg@5']:.3f} | {r['recall@5']:.3f} | {r['ms_p50']:.1f} |")
    lines += ["", "| answers (`amsrag ask`) | EM | F1 | answered | cites the gold paragraph | p50 ms |",
              "|---|---:|---:|---:|---:|---:|"]
    for a in result["answers"]:
        lines.append(f"| {a['system']} ({a['n']} questions) | {a['em']:.3f} | {a['f1']:.3f} | {a['answered']:.3f} | "
                     f"{a['cites_gold']:.3f} | {a['ms_p50']:.0f} |")
    return [*lines, ""]
