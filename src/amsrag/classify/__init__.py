"""Complexity classifier with calibrated confidence (DESIGN §3).

`ComplexityClassifier.load()` loads the artifact shipped in the package; `predict(question,
query_vector=None)` gives a `ComplexityPrediction(label, probs, alpha)`. Pass the shared query
embedding as `query_vector` to skip embedding the question a second time.

Inference only: the model and its artifact (`model`), the question features (`features`). Training data,
training, evaluation and baselines live in `amsrag.learn.classifier`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from amsrag.classify.model import ComplexityClassifier, ComplexityPrediction, shipped_artifact_dir


@runtime_checkable
class Classifier(Protocol):
    """What the router needs from a complexity classifier."""

    def predict(self, question: str, query_vector: np.ndarray | None = None) -> ComplexityPrediction: ...

    def predict_batch(
        self, questions: Sequence[str], query_vectors: np.ndarray | Sequence[np.ndarray] | None = None
    ) -> list[ComplexityPrediction]: ...


__all__ = ["Classifier", "ComplexityClassifier", "ComplexityPrediction", "shipped_artifact_dir"]
