"""Shared pieces of the benchmarks: the benchmark corpus and retrieval metrics."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from amsrag.types import Passage, QAExample

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"
CACHE = ROOT / "bench-cache"

# Every file of ../shared/data whose paragraphs make up the benchmark corpus.
CORPUS_FILES = [
    "hotpotqa/rpt_hotpot_distractor_validation_dev.jsonl",
    "hotpotqa/rpt_hotpot_distractor_validation_train.jsonl",
    "hotpotqa/ircot_hotpotqa_dev_subsampled.jsonl",
    "hotpotqa/migres_hotpot_200.jsonl",
    "hotpotqa/hipporag_hotpotqa_train_100.json",
    "musique/migres_musique_200.jsonl",
    "musique/hipporag_musique_train_100.json",
    "nq/lostinthemiddle_nq-open-oracle.jsonl.gz",
    "squad/squad_v1.1_subset_20articles.json",
    "squad/routerlens_squad_dev_4330.json",
    "flashrag/wiki_sample_corpus_1000.jsonl",
]
# Questions scored for retrieval (gold paragraphs known).
QUESTION_DATASETS = ("hotpotqa", "musique", "nq")


def load_benchmark(data_dir: Path = SHARED_DATA) -> tuple[list[Passage], list[QAExample]]:
    """The union of the corpus files' passages (deduplicated by content) and their questions (by id)."""
    from amsrag.ingest import load_qa

    passages: dict[str, Passage] = {}
    questions: dict[str, QAExample] = {}
    seen_questions: set[str] = set()
    for rel in CORPUS_FILES:
        qa = load_qa(data_dir / rel)
        for p in qa.passages:
            passages.setdefault(p.content_hash, p)
        for q in qa.questions:
            key = " ".join(q.question.lower().split())
            if q.dataset in QUESTION_DATASETS and q.gold_passage_ids and key not in seen_questions:
                seen_questions.add(key)
                questions[q.id] = q
    return list(passages.values()), list(questions.values())


def recall_at(ranked: Sequence[str], gold: Sequence[str], k: int) -> float:
    return len(set(ranked[:k]) & set(gold)) / len(gold)


def ndcg_at(ranked: Sequence[str], gold: Sequence[str], k: int) -> float:
    g = set(gold)
    dcg = sum(1.0 / math.log2(i + 2) for i, pid in enumerate(ranked[:k]) if pid in g)
    idcg = sum(1.0 / math.log2(i + 2) for i in range(min(len(g), k)))
    return dcg / idcg


def percentiles(ms: Sequence[float]) -> dict[str, float]:
    a = np.asarray(ms)
    return {"p50": round(float(np.percentile(a, 50)), 3), "p95": round(float(np.percentile(a, 95)), 3),
            "mean": round(float(a.mean()), 3)}


class Timer:
    def __enter__(self) -> Timer:
        self.t = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.ms = (time.perf_counter() - self.t) * 1000
