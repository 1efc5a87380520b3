"""Corrective retrieval (DESIGN §6, CRAG): retrieval evaluator, tri-state actions, sufficiency check.

- `RetrievalEvaluator.load()` (the shipped artifact) `.score(query, query_vector, passages, passage_vectors)`
  -> calibrated relevance in [0, 1] per passage.
- `CorrectiveStep(config, evaluator).assess(...)` -> `Assessment(score, per_passage, action)`;
  `.correct(...)` -> `Correction` (strips for correct, rewritten query + escalate for incorrect, both for
  ambiguous).
- `refine_strips`, `rewrite_query`: the two actions on their own.
- `sufficiency.check(query, passages, multi_hop)` -> `Sufficiency(ok, covered, missing, bridge)`.

Run time only; the evaluator's training pools and training live in `amsrag.learn.evaluator`.
"""

from amsrag.correct.actions import (
    Action,
    Assessment,
    Correction,
    CorrectiveStep,
    Strip,
    aggregate_scores,
    decide,
    refine_strips,
    rewrite_query,
)
from amsrag.correct.evaluator import RetrievalEvaluator, shipped_artifact_dir
from amsrag.correct.sufficiency import Bridge, Sufficiency, check

__all__ = [
    "Action",
    "Assessment",
    "Bridge",
    "Correction",
    "CorrectiveStep",
    "RetrievalEvaluator",
    "Strip",
    "Sufficiency",
    "aggregate_scores",
    "check",
    "decide",
    "refine_strips",
    "rewrite_query",
    "shipped_artifact_dir",
]
