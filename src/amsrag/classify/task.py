"""The task head: does a question need text passages, the corpus as a whole (aggregation) or a table
(structured)? Multinomial logistic regression over [MiniLM embedding, cue and table-match features],
temperature-scaled on held-out questions, shipped as an artifact (npz + JSON card, `amsrag.artifacts`).

The router multiplies it into the five-way taxonomy: p(zero_hop) = p(text) p_hop(zero_hop), …,
p(aggregation), p(structured). An index without tables never routes to structured: its probability is
set to 0 and the rest renormalised.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from amsrag.artifacts import ArtifactFormat, check_features, load_artifact, save_artifact
from amsrag.calibration import softmax
from amsrag.classify.task_features import FEATURE_NAMES, TASK_FEATURE_VERSION, task_features
from amsrag.embed.encoder import DIMENSION
from amsrag.tables.base import TableHit
from amsrag.types import COMPLEXITIES, TASK_KINDS, TaskKind

ARTIFACT_VERSION = 1
FORMAT = ArtifactFormat(kind="task head", article="a", card="task.json", arrays="task.npz",
                        version=ARTIFACT_VERSION, readable=(ARTIFACT_VERSION,),
                        train_command="amsrag train taxonomy train")


def shipped_artifact_dir() -> Path:
    return Path(str(resources.files("amsrag") / "data" / "task"))


@dataclass(frozen=True, slots=True)
class TaskPrediction:
    label: TaskKind
    probs: dict[str, float]  # over TASK_KINDS, sums to 1
    alpha: float

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "probs": {k: round(v, 4) for k, v in self.probs.items()},
                "alpha": round(self.alpha, 4)}


def mask_probs(probs: np.ndarray, has_tables: bool) -> np.ndarray:
    """(n, 3) probabilities with structured removed (and the rest renormalised) when there are no tables."""
    p = np.array(probs, dtype=np.float64, copy=True)
    if not has_tables:
        p[:, TASK_KINDS.index("structured")] = 0.0
        p /= p.sum(axis=1, keepdims=True)
    return p


@dataclass(frozen=True, slots=True)
class TaskHead:
    coef: np.ndarray  # (DIMENSION + n_features, 3)
    intercept: np.ndarray  # (3,)
    mean: np.ndarray
    scale: np.ndarray
    temperature: float
    card: Mapping[str, Any]

    def logits(self, embeddings: np.ndarray, features: np.ndarray) -> np.ndarray:
        x = (np.hstack([embeddings, features]).astype(np.float64) - self.mean) / self.scale
        return np.asarray(x @ self.coef + self.intercept)

    def probabilities(self, embeddings: np.ndarray, features: np.ndarray, has_tables: Sequence[bool]) -> np.ndarray:
        p = softmax(self.logits(embeddings, features) / self.temperature)
        for i, has in enumerate(has_tables):
            if not has:
                p[i : i + 1] = mask_probs(p[i : i + 1], False)
        return p

    def predict(self, question: str, query_vector: np.ndarray, hits: Sequence[TableHit],
                has_tables: bool) -> TaskPrediction:
        f = task_features(question, hits if has_tables else ())[None, :]
        p = self.probabilities(np.asarray(query_vector, dtype=np.float64)[None, :], f, [has_tables])[0]
        i = int(np.argmax(p))
        return TaskPrediction(TASK_KINDS[i], {k: float(v) for k, v in zip(TASK_KINDS, p, strict=True)}, float(p[i]))

    def save(self, directory: Path | str, card: Mapping[str, Any]) -> Path:
        arrays = {"coef": self.coef, "intercept": self.intercept, "mean": self.mean, "scale": self.scale,
                  "temperature": np.array([self.temperature])}
        spec = {**card, "artifact_version": ARTIFACT_VERSION,
                "features": {"version": TASK_FEATURE_VERSION, "names": list(FEATURE_NAMES)},
                "classes": list(TASK_KINDS), "embedding_dimension": DIMENSION}
        return save_artifact(directory, FORMAT, arrays, spec)

    @classmethod
    def load(cls, path: Path | str | None = None) -> TaskHead:
        artifact = load_artifact(Path(path) if path else shipped_artifact_dir(), FORMAT)
        check_features(artifact, FORMAT, TASK_FEATURE_VERSION, FEATURE_NAMES)
        coef = artifact.array("coef")
        if coef.shape != (DIMENSION + len(FEATURE_NAMES), len(TASK_KINDS)):
            from amsrag.errors import InputError

            raise InputError(f"{artifact.arrays_path}: coef has shape {coef.shape}; the artifact is corrupt")
        return cls(coef, artifact.array("intercept"), artifact.array("mean"), artifact.array("scale"),
                   float(artifact.array("temperature")[0]), artifact.card)


def five_way(task: Mapping[str, float], hop: Mapping[str, float], classes: Sequence[str]) -> dict[str, float]:
    """The taxonomy's probabilities: text's share split by the hop classifier, aggregation and structured
    as the task head gives them; classes not in use fold into the text share."""
    text = float(task.get("text", 1.0))
    extra = {c: float(task.get(c, 0.0)) for c in ("aggregation", "structured")}
    for c in list(extra):
        if c not in classes:
            text += extra.pop(c)
    out: dict[str, float] = {c: text * float(hop.get(c, 0.0)) for c in COMPLEXITIES}
    out.update(extra)
    return out
