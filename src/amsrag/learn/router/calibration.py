"""The calibration pass of `amsrag train route tune`: each question classified once and each retriever's ranked list
at the routes' depth, the input of every fit (thresholds, priors, routes, MMR)."""


from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from amsrag.config import RouterConfig
from amsrag.retrievers import retriever_for
from amsrag.route.router import retrieval_class
from amsrag.types import COMPLEXITIES, RETRIEVERS, Complexity, QAExample

FIT_K = 5  # the fits maximise nDCG@5: the passages a query hands on
MAX_DEPTH = 100
SEEDED = "graph"  # the retriever walking from the others' hits (RetrievalPass.retrieve)
SEEDERS = ("bm25", "dense")



@dataclass(frozen=True, slots=True)
class RankedList:
    """One retriever's ranking of a query: passage ids and store rows, rank = position + 1."""

    ids: tuple[str, ...]
    rows: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class CalibrationQuery:
    true_class: str
    predicted: Complexity
    alpha: float
    ndcg: Mapping[str, float] = field(default_factory=dict)  # per retriever, nDCG@10 of the gold (empty: no gold)
    gold: tuple[str, ...] = ()
    # per retriever (list_key: the seeded retriever per set of co-activated seeders), at the routes' depth
    lists: Mapping[str, RankedList] = field(default_factory=dict)


def ndcg10(ranked: Sequence[str], gold: Sequence[str]) -> float:
    g = set(gold)
    dcg = sum(1 / math.log2(i + 2) for i, pid in enumerate(ranked[:10]) if pid in g)
    return dcg / sum(1 / math.log2(i + 2) for i in range(min(len(g), 10)))


# ---------------------------------------------------------------- the calibration pass


def list_key(retriever: str, activated: Iterable[str]) -> str:
    """Which stored list a retriever contributes when `activated` run together: the seeded retriever walks
    from the other activated seeders' hits ("graph<dense"), or from all its seeders when alone or with all."""
    if retriever != SEEDED:
        return retriever
    others = sorted(set(activated) & set(SEEDERS))
    if not others or len(others) == len(SEEDERS):
        return retriever
    return f"{retriever}<{'+'.join(others)}"


def calibration_depth(router: RouterConfig) -> int:
    return min(MAX_DEPTH, max(router.depth.values()))


def _ranked(hits: Sequence[Any]) -> RankedList:
    return RankedList(tuple(h.id for h in hits), tuple(int(h.row) for h in hits))


def retriever_lists(engine: Any, question: str, vector: np.ndarray, depth: int) -> dict[str, RankedList]:
    """Each retriever's ranking at `depth`; the seeded retriever also seeded from each seeder alone."""
    hits: dict[str, list[Any]] = {r: retriever_for(engine.index, r).search(question, k=depth, query_vector=vector)
                                  for r in RETRIEVERS if r != SEEDED}
    out: dict[str, RankedList] = {r: _ranked(h) for r, h in hits.items()}
    if SEEDED in RETRIEVERS:
        seeded = retriever_for(engine.index, SEEDED)
        out[SEEDED] = _ranked(seeded.search(question, k=depth, query_vector=vector))
        if hasattr(seeded, "search_seeded"):
            for s in SEEDERS:
                out[list_key(SEEDED, (s,))] = _ranked(seeded.search_seeded(question, depth, [hits[s]]))
    return out


def calibration_queries(engine: Any, questions: Sequence[QAExample],
                        progress: Callable[[int], None] | None = None) -> list[CalibrationQuery]:
    """Classify every question and, where its gold passages are indexed, keep each retriever's ranking."""
    depth = calibration_depth(engine.config.router)
    out = []
    for q in questions:
        if q.complexity not in COMPLEXITIES:
            continue
        vec = engine.index.encoder.encode_query(q.question)
        pred = engine.classifier.predict(q.question, query_vector=vec)
        ndcg: dict[str, float] = {}
        lists: dict[str, RankedList] = {}
        gold: tuple[str, ...] = ()
        if q.gold_passage_ids and len(engine.index.rows_for_ids(q.gold_passage_ids)) == len(q.gold_passage_ids):
            gold = tuple(sorted(set(q.gold_passage_ids)))
            lists = retriever_lists(engine, q.question, vec, depth)
            ndcg = {r: ndcg10(lists[r].ids, gold) for r in RETRIEVERS}
        label, alpha = retrieval_class(pred.label, pred.probs, pred.alpha, engine.generator_knows)
        out.append(CalibrationQuery(q.complexity, label, alpha, ndcg, gold, lists))
        if progress is not None:
            progress(1)
    return out


# ---------------------------------------------------------------- offline CA-RRF
