"""Training data of the learned fuser: real retrieval passes over an index for questions with gold passages.

Per question: the query embedding, the classifier's routed class and confidence, then one pass per retriever
subset of `SUBSETS` (the subsets routes activate: every single retriever, every pair, all three), with the
second hop where the routed class is multi_hop (and, for all three, also the escalation's multi-hop pass),
exactly as `RetrievalPass.run` does at query time with CA-RRF as the base fusion. Each pass gives one group:
the base fusion's top `pool` candidates, their features (`fuse.learned.pool_features`) and binary labels
(gold or not). The singleton passes also give each retriever's nDCG@10 on the question: the expert memory.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from amsrag.evaluate.builder import EvalQuery
from amsrag.fuse.features import FEATURE_RETRIEVERS, HOP_LIST, QueryInputs
from amsrag.fuse.learned import pool_features
from amsrag.pipeline import Engine, QueryContext
from amsrag.pipeline.signals import IndexSignals
from amsrag.pipeline.systems import SystemSpec
from amsrag.retrievers import retriever_for
from amsrag.route import RoutePlan
from amsrag.types import Hit

SUBSETS: tuple[tuple[str, ...], ...] = (
    ("bm25",), ("dense",), ("graph",), ("bm25", "dense"), ("dense", "graph"), ("bm25", "graph"),
    ("bm25", "dense", "graph"),
)
_SPEC = SystemSpec("fusion-train", adaptive=True, fusion="ca-rrf", mmr=False)


@dataclass(frozen=True, slots=True)
class Group:
    """One pass's candidates: features, labels, and what the pass was."""

    question: int  # index into the questions
    subset: tuple[str, ...]
    multi_hop: bool
    x: np.ndarray
    labels: np.ndarray
    ids: tuple[str, ...]  # the candidates, in the base fusion's order


@dataclass(slots=True)
class Collected:
    groups: list[Group]
    vectors: np.ndarray  # (n questions, dim), L2-normalised
    quality: np.ndarray  # (n questions, len(FEATURE_RETRIEVERS)): nDCG@10 of each retriever alone
    classes: list[str]


def ndcg_at(ranked: Sequence[str], gold: Sequence[str], k: int) -> float:
    g = set(gold)
    if not g:
        return math.nan
    dcg = sum(1 / math.log2(i + 2) for i, pid in enumerate(ranked[:k]) if pid in g)
    return dcg / sum(1 / math.log2(i + 2) for i in range(min(len(g), k)))


def collect(engine: Engine, questions: Sequence[EvalQuery], pool: int,
            progress: Callable[[int], None] | None = None) -> Collected:
    """Groups of every question and subset (see the module docstring)."""
    signals = IndexSignals(engine.index)
    depth = engine.config.router.depth
    groups: list[Group] = []
    vectors, quality, classes = [], [], []
    for qi, q in enumerate(questions):
        vector = engine.index.encoder.encode_query(q.question)
        complexity = engine.complexity_of(q.question, vector, generator_knows=False)
        label, alpha = complexity.routed
        context = QueryInputs(q.question, vector, float(complexity.probs.get("multi_hop", 0.0)),
                               float(complexity.probs.get("zero_hop", 0.0)), float(alpha))
        gold = set(q.gold)
        scores = {}
        for subset in SUBSETS:
            hop_settings = [label == "multi_hop"] + ([label != "multi_hop"] if len(subset) == 3 else [])
            for multi_hop in hop_settings:
                strategy = "C" if len(subset) == 3 else "B" if len(subset) == 2 else "A"
                plan = RoutePlan(strategy, subset, "multi_hop" if multi_hop else label, alpha, depth[strategy],
                                 5, multi_hop, "fusion training")
                done = engine.passes.run(QueryContext(q.question, vector, _SPEC, complexity=complexity), plan)
                lists: dict[str, list[Hit]] = {name: run.hits for name, run in done.runs.items()}
                if done.second_hop is not None:
                    lists[HOP_LIST] = done.second_hop.hits
                if len(subset) == 1 and not multi_hop:
                    (name,) = subset
                    scores[name] = ndcg_at([h.id for h in lists[name]], q.gold, 10)
                candidates, x = pool_features(done.fused, lists, context, signals, pool)
                labels = np.asarray([float(c.id in gold) for c in candidates])
                groups.append(Group(qi, subset, multi_hop, x, labels, tuple(c.id for c in candidates)))
        for name in FEATURE_RETRIEVERS:
            if name not in scores:  # the singleton ran with the second hop: score the retriever alone
                hits = retriever_for(engine.index, name).search(q.question, k=10, query_vector=vector)
                scores[name] = ndcg_at([h.id for h in hits], q.gold, 10)
        v = np.asarray(vector, dtype=np.float32)
        vectors.append(v / max(float(np.linalg.norm(v)), 1e-12))
        quality.append([scores[r] for r in FEATURE_RETRIEVERS])
        classes.append(label)
        if progress is not None:
            progress(1)
    return Collected(groups, np.asarray(vectors, dtype=np.float32), np.asarray(quality, dtype=np.float64), classes)
