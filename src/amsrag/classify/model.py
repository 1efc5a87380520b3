"""The two-head complexity classifier, its prediction type and its artifact (npz + JSON card, `amsrag.artifacts`).

- hop head: p_h = p(multi_hop | needs retrieval), logistic regression on [MiniLM embedding, features];
- knowledge head: p_k = p(zero_hop), logistic regression on the cheap features only (the 384-d embedding
  overfits the ~800 silver rows it can learn from), trained on silver A/B/C;
- gate: zero_hop only when the knowledge head is confident, p_k >= tau (tau fitted on the calibration
  split; stored as the equivalent raw-logit threshold so calibration never moves a decision);
- probabilities: z = p_k if the gate is open else 0;
  p(zero_hop) = z, p(one_hop) = (1 - z)(1 - p_h), p(multi_hop) = (1 - z) p_h;
  label = argmax (zero_hop when the gate is open, since tau >= 0.5), alpha = max probability.
  Below the gate the knowledge head's "maybe" carries no mass: zero_hop is not an available route
  there, and the hop head's calibrated confidence is what the router should act on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from amsrag.artifacts import SHA256_KEY, ArtifactFormat, check_features, load_artifact, save_artifact
from amsrag.calibration import Calibrator, IdentityCalibrator, calibrator_from_params
from amsrag.classify.features import FEATURE_NAMES, FEATURE_VERSION, features_batch
from amsrag.config import ClassifierConfig
from amsrag.embed.encoder import DIMENSION, Encoder
from amsrag.errors import InputError
from amsrag.types import COMPLEXITIES, Complexity

ARTIFACT_VERSION = 2
READABLE_VERSIONS = (1, 2)  # version 1: every head reads the embedding
ARTIFACT_JSON = "classifier.json"
ARTIFACT_NPZ = "classifier.npz"
HEADS = ("hop", "knowledge")
FORMAT = ArtifactFormat(kind="classifier", article="a", card=ARTIFACT_JSON, arrays=ARTIFACT_NPZ,
                        version=ARTIFACT_VERSION, readable=READABLE_VERSIONS, train_command="amsrag classifier train")


def shipped_artifact_dir() -> Path:
    return Path(str(resources.files("amsrag") / "data" / "classifier"))


@dataclass(frozen=True, slots=True)
class ComplexityPrediction:
    label: Complexity
    probs: dict[str, float]  # over zero_hop, one_hop, multi_hop; sums to 1
    alpha: float  # calibrated probability of `label` (the max)

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "probs": dict(self.probs), "alpha": self.alpha}


@dataclass(frozen=True, slots=True)
class Head:
    """A logistic-regression head over standardised [embedding, features] (either part optional)."""

    coef: np.ndarray  # ([DIMENSION] [+ n_features],)
    intercept: float
    mean: np.ndarray
    scale: np.ndarray
    use_features: bool
    calibrator: Calibrator = field(default_factory=IdentityCalibrator)
    use_embedding: bool = True

    def inputs(self, embeddings: np.ndarray, features: np.ndarray) -> np.ndarray:
        return (head_inputs(embeddings, features, self.use_embedding, self.use_features) - self.mean) / self.scale

    def logits(self, embeddings: np.ndarray, features: np.ndarray) -> np.ndarray:
        return self.inputs(embeddings, features) @ self.coef + self.intercept

    def with_calibrator(self, calibrator: Calibrator) -> Head:
        return Head(self.coef, self.intercept, self.mean, self.scale, self.use_features, calibrator, self.use_embedding)


def head_inputs(embeddings: np.ndarray, features: np.ndarray, use_embedding: bool, use_features: bool) -> np.ndarray:
    """The raw (unstandardised) input matrix of a head."""
    parts = ([embeddings] if use_embedding else []) + ([features] if use_features else [])
    if not parts:
        raise ValueError("a head needs the embedding, the features or both")
    return np.asarray(np.hstack(parts), dtype=np.float64)


def combine(p_multi: np.ndarray, p_zero: np.ndarray, gate: np.ndarray) -> np.ndarray:
    """(n, 3) probabilities over COMPLEXITIES from the hop head, the knowledge head and the gate."""
    z = np.where(gate, p_zero, 0.0)
    return np.stack([z, (1.0 - z) * (1.0 - p_multi), (1.0 - z) * p_multi], axis=1)


def decide(logit_hop: np.ndarray, logit_zero: np.ndarray, zero_logit: float) -> tuple[np.ndarray, np.ndarray]:
    """(label index, gate) from raw logits only: calibration cannot move them."""
    gate = np.asarray(logit_zero) >= zero_logit
    label = np.where(gate, 0, np.where(np.asarray(logit_hop) >= 0, 2, 1))
    return label, gate


def _check_question(question: Any) -> str:
    if not isinstance(question, str) or not question.strip():
        raise InputError("empty question: the complexity classifier needs a non-empty question")
    return question.strip()


class ComplexityClassifier:
    """Two calibrated heads combined into (label, probs, alpha); see the module docstring."""

    def __init__(
        self,
        hop: Head,
        knowledge: Head,
        zero_logit: float,
        meta: dict[str, Any] | None = None,
        encoder: Encoder | None = None,
    ) -> None:
        self.hop = hop
        self.knowledge = knowledge
        self.zero_logit = float(zero_logit)
        self.meta: dict[str, Any] = dict(meta or {})
        self._encoder = encoder

    # ------------------------------------------------------------ prediction

    @property
    def encoder(self) -> Encoder:
        if self._encoder is None:
            from amsrag.embed.encoder import MiniLMEncoder

            self._encoder = MiniLMEncoder()
        return self._encoder

    def raw_logits(self, embeddings: np.ndarray, features: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self.hop.logits(embeddings, features), self.knowledge.logits(embeddings, features)

    def probabilities(
        self, embeddings: np.ndarray, features: np.ndarray, calibrated: bool = True
    ) -> tuple[np.ndarray, np.ndarray]:
        """(label index (n,), probs (n, 3)) for precomputed embeddings and features."""
        zh, zk = self.raw_logits(embeddings, features)
        label, gate = decide(zh, zk, self.zero_logit)
        if calibrated:
            p_multi, p_zero = self.hop.calibrator.prob1(zh), self.knowledge.calibrator.prob1(zk)
        else:
            identity = IdentityCalibrator()
            p_multi, p_zero = identity.prob1(zh), identity.prob1(zk)
        return label, combine(p_multi, p_zero, gate)

    def _vectors(self, questions: Sequence[str], query_vectors: np.ndarray | Sequence[np.ndarray] | None) -> np.ndarray:
        if query_vectors is None:
            return self.encoder.encode(list(questions))
        vectors = np.asarray(query_vectors, dtype=np.float32)
        if vectors.ndim == 1:
            vectors = vectors[None, :]
        if vectors.shape != (len(questions), DIMENSION):
            raise InputError(f"query vectors must have shape ({len(questions)}, {DIMENSION}), got {vectors.shape}")
        return vectors

    def predict_batch(
        self, questions: Sequence[str], query_vectors: np.ndarray | Sequence[np.ndarray] | None = None
    ) -> list[ComplexityPrediction]:
        qs = [_check_question(q) for q in questions]
        if not qs:
            return []
        label, probs = self.probabilities(self._vectors(qs, query_vectors), features_batch(qs))
        out = []
        for i in range(len(qs)):
            p: dict[str, float] = {c: float(probs[i, j]) for j, c in enumerate(COMPLEXITIES)}
            c = COMPLEXITIES[int(label[i])]
            out.append(ComplexityPrediction(label=c, probs=p, alpha=p[c]))
        return out

    def predict(self, question: str, query_vector: np.ndarray | None = None) -> ComplexityPrediction:
        return self.predict_batch([question], None if query_vector is None else [query_vector])[0]

    # ------------------------------------------------------------ artifact

    def save(self, directory: Path | str) -> Path:
        """Write `classifier.npz` (arrays) and `classifier.json` (everything else, with the npz's sha256)."""
        arrays: dict[str, np.ndarray] = {}
        heads: dict[str, Any] = {}
        for name in HEADS:
            head: Head = getattr(self, name)
            arrays[f"{name}_coef"] = head.coef
            arrays[f"{name}_intercept"] = np.array([head.intercept])
            arrays[f"{name}_mean"] = head.mean
            arrays[f"{name}_scale"] = head.scale
            for key, value in head.calibrator.params().items():
                arrays[f"{name}_cal_{key}"] = np.asarray(value, dtype=np.float64)
            heads[name] = {"use_features": head.use_features, "use_embedding": head.use_embedding,
                           "calibration": head.calibrator.method,
                           "calibration_params": sorted(head.calibrator.params())}
        card = {
            "artifact_version": ARTIFACT_VERSION,
            "labels": list(COMPLEXITIES),
            "heads": heads,
            "zero_logit": self.zero_logit,
            "features": {"version": FEATURE_VERSION, "names": list(FEATURE_NAMES)},
            **{k: v for k, v in self.meta.items() if k not in ("artifact_version", "labels", "heads", "features")},
        }
        return save_artifact(directory, FORMAT, arrays, card)

    @classmethod
    def from_config(cls, config: ClassifierConfig, encoder: Encoder | None = None) -> ComplexityClassifier:
        return cls.load(config.artifact or None, encoder=encoder)

    @classmethod
    def load(cls, path: Path | str | None = None, encoder: Encoder | None = None) -> ComplexityClassifier:
        """Load an artifact directory (None: the one shipped in the package)."""
        artifact = load_artifact(Path(path) if path is not None else shipped_artifact_dir(), FORMAT)
        check_features(artifact, FORMAT, FEATURE_VERSION, FEATURE_NAMES)
        spec = artifact.card
        if spec.get("labels") != list(COMPLEXITIES):
            raise InputError(f"{artifact.card_path}: label map {spec.get('labels')} differs from {list(COMPLEXITIES)}")
        array = artifact.array
        heads = {}
        for name in HEADS:
            h = spec["heads"][name]
            params = {k: array(f"{name}_cal_{k}") for k in h["calibration_params"]}
            heads[name] = Head(
                coef=array(f"{name}_coef"), intercept=float(array(f"{name}_intercept")[0]),
                mean=array(f"{name}_mean"), scale=array(f"{name}_scale"), use_features=bool(h["use_features"]),
                calibrator=calibrator_from_params(h["calibration"], params),
                use_embedding=bool(h.get("use_embedding", True)),
            )
        meta = {k: v for k, v in spec.items() if k not in ("heads", "zero_logit", SHA256_KEY)}
        return cls(heads["hop"], heads["knowledge"], float(spec["zero_logit"]), meta=meta, encoder=encoder)
