"""The evaluation harness (DESIGN §7): benchmark builder, metrics, bootstrap, systems runner, report."""

from amsrag.evaluate.bootstrap import Bootstrap
from amsrag.evaluate.builder import Benchmark, BenchmarkSpec, EvalQuery
from amsrag.evaluate.metrics import (
    all_gold_at,
    exact_match,
    f1_score,
    mrr_at,
    ndcg_at,
    normalize_answer,
    query_metrics,
    recall_at,
)

__all__ = [
    "Benchmark",
    "BenchmarkSpec",
    "Bootstrap",
    "EvalQuery",
    "all_gold_at",
    "exact_match",
    "f1_score",
    "mrr_at",
    "ndcg_at",
    "normalize_answer",
    "query_metrics",
    "recall_at",
]
