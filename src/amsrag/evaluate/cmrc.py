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
from typing import Any

import numpy as np

from amsrag.config import AmsragConfig
from amsrag.evaluate.metrics import ndcg_at, recall_at
from amsrag.ingest.cmrc import Cmrc, CmrcQuestion, load_cmrc
from amsrag.retrieve.bm25 import BM25Index
from amsrag.types import Passage, PassageRow

K = 5
RETRIEVERS = ("bm25", "dense", "graph")
CHINESE_ENCODER = "multilingual-e5-small"


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
        retriever = engine.index.retriever(name)
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
