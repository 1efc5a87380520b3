"""The evaluation harness (DESIGN §7): benchmark builder, metrics, bootstrap, systems runner, report.
The names below are imported on first use (`amsrag.lazy`)."""

from typing import TYPE_CHECKING

from amsrag.lazy import lazy_exports

if TYPE_CHECKING:
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
__getattr__, __dir__ = lazy_exports(__name__, {
    "Bootstrap": "amsrag.evaluate.bootstrap", "Benchmark": "amsrag.evaluate.builder",
    "BenchmarkSpec": "amsrag.evaluate.builder", "EvalQuery": "amsrag.evaluate.builder",
    "all_gold_at": "amsrag.evaluate.metrics", "exact_match": "amsrag.evaluate.metrics",
    "f1_score": "amsrag.evaluate.metrics", "mrr_at": "amsrag.evaluate.metrics",
    "ndcg_at": "amsrag.evaluate.metrics", "normalize_answer": "amsrag.evaluate.metrics",
    "query_metrics": "amsrag.evaluate.metrics", "recall_at": "amsrag.evaluate.metrics",
})
