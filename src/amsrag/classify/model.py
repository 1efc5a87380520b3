"""The complexity classifier, its prediction type and its artifact (npz + JSON card, `amsrag.artifacts`).

- hop head: p_h = p(multi_hop), logistic regression on [MiniLM embedding, structural features], trained on
  the data sets' hop structure, temperature-scaled on a calibration mix of data sets;
- knowledge head (optional): p_k = p(zero_hop), logistic regression on the cheap features, trained only on
  labels made with one generator (`amsrag train classifier label`); absent for a generator that cannot answer
  closed-book (the shipped artifact: the extractive default), and then p(zero_hop) = 0;
- gate: zero_hop only when the knowledge head is confident, p_k >= tau, and never for a two-entity
  comparison (it needs both entities' passages by construction); tau stored as a raw-logit threshold;
- probabilities: z = p_k if the gate is open else 0;
  p(zero_hop) = z, p(one_hop) = (1 - z)(1 - p_h), p(multi_hop) = (1 - z) p_h;
  label = argmax, alpha = max probability;
- query library (optional, per index): p_h is blended with the close labelled neighbours' vote
  (`amsrag.classify.library`); the prediction says whether the library changed the label;
- a question the English encoder cannot read (Chinese: MiniLM maps most Han characters to [UNK]) is
  classified with a neutral embedding: its standardised embedding inputs are set to 0, the training mean,
  so the structural features (Chinese cues included) decide; the query library is not consulted for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from amsrag.artifacts import SHA256_KEY, ArtifactFormat, check_features, load_artifact, save_artifact
from amsrag.calibration import Calibrator, IdentityCalibrator, TemperatureCalibrator, calibrator_from_params
from amsrag.classify.features import (
    COMPARISON,
    EMPTY_QUESTION,
    FEATURE_NAMES,
    FEATURE_VERSION,
    bounded,
    features_batch,
    is_blank,
    is_chinese_question,
)
from amsrag.classify.library import LibrarySettings, LibraryVote, QueryLibrary, blend
from amsrag.config import ClassifierConfig
from amsrag.embed.encoder import DIMENSION, Encoder
from amsrag.errors import InputError
from amsrag.types import COMPLEXITIES, Complexity

ARTIFACT_VERSION = 3
READABLE_VERSIONS = (3,)  # version 3: structural features v2, optional knowledge head
ARTIFACT_JSON = "classifier.json"
ARTIFACT_NPZ = "classifier.npz"
HEADS = ("hop", "knowledge")
FORMAT = ArtifactFormat(kind="classifier", article="a", card=ARTIFACT_JSON, arrays=ARTIFACT_NPZ,
                        version=ARTIFACT_VERSION, readable=READABLE_VERSIONS,
                        train_command="amsrag train classifier train")


def shipped_artifact_dir() -> Path:
    return Path(str(resources.files("amsrag") / "data" / "classifier"))


@dataclass(frozen=True, slots=True)
class ComplexityPrediction:
    label: Complexity
    probs: dict[str, float]  # over zero_hop, one_hop, multi_hop; sums to 1
    alpha: float  # calibrated probability of `label` (the max)
    library: LibraryVote | None = None  # the close labelled neighbours' vote, when there were any
    decided_by: str = "classifier"  # "library" when the vote changed the classifier's label
    embedding: bool = True  # False: the encoder cannot read the question; its embedding was neutral

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"label": self.label, "probs": dict(self.probs), "alpha": self.alpha,
                               "decided_by": self.decided_by}
        if not self.embedding:
            out["embedding"] = False
        if self.library is not None:
            out["library"] = self.library.to_dict()
        return out


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

    def inputs(self, embeddings: np.ndarray, features: np.ndarray, blind: np.ndarray | None = None) -> np.ndarray:
        """Standardised inputs; rows where `blind` is set get a neutral embedding (the training mean)."""
        x = (head_inputs(embeddings, features, self.use_embedding, self.use_features) - self.mean) / self.scale
        if blind is not None and self.use_embedding:
            x[np.asarray(blind, dtype=bool), : embeddings.shape[1]] = 0.0
        return x

    def logits(self, embeddings: np.ndarray, features: np.ndarray, blind: np.ndarray | None = None) -> np.ndarray:
        return self.inputs(embeddings, features, blind) @ self.coef + self.intercept

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


def decide(logit_hop: np.ndarray, logit_zero: np.ndarray | None, zero_logit: float,
           comparison: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(label index, gate) from raw logits only: calibration cannot move them. `comparison`: rows the gate
    stays shut for (two-entity comparisons)."""
    logit_hop = np.asarray(logit_hop)
    if logit_zero is None:
        gate = np.zeros(logit_hop.shape, dtype=bool)
    else:
        gate = np.asarray(logit_zero) >= zero_logit
        if comparison is not None:
            gate &= ~np.asarray(comparison, dtype=bool)
    label = np.where(gate, 0, np.where(logit_hop >= 0, 2, 1))
    return label, gate


def comparisons(features: np.ndarray) -> np.ndarray:
    """The two-entity-comparison rows of a feature matrix (`features_batch` computed `is_comparison` there)."""
    return np.asarray(features)[:, COMPARISON] > 0


def _check_question(question: Any) -> str:
    """The question as the classifier reads it: stripped and cut to its budget (`MAX_QUESTION_CHARS`), so a
    huge question passed directly costs what a long one does (features and embedding alike)."""
    if not isinstance(question, str):
        raise InputError(f"the question must be text, got {type(question).__name__}")
    q = bounded(question.strip()).strip()  # str.strip runs in C: microseconds even on 100 kB
    if is_blank(q) and is_blank(question):
        raise InputError(EMPTY_QUESTION)
    return q


class ComplexityClassifier:
    """The calibrated hop head and the optional knowledge head combined into (label, probs, alpha); see the
    module docstring."""

    def __init__(
        self,
        hop: Head,
        knowledge: Head | None,
        zero_logit: float,
        meta: dict[str, Any] | None = None,
        encoder: Encoder | None = None,
        library_settings: LibrarySettings | None = None,
    ) -> None:
        self.hop = hop
        self.knowledge = knowledge
        self.zero_logit = float(zero_logit)
        self.meta: dict[str, Any] = dict(meta or {})
        self._encoder = encoder
        self.library_settings = library_settings or LibrarySettings()

    @property
    def knows_generator(self) -> str | None:
        """The generator whose closed-book answers the knowledge head learned (None: no knowledge head)."""
        if self.knowledge is None:
            return None
        return str(self.meta.get("knowledge", {}).get("generator") or "unknown")

    def with_hop_temperature(self, temperature: float) -> ComplexityClassifier:
        """A copy whose hop head is temperature-scaled by `temperature` (a deployment's own recalibration)."""
        if not temperature > 0:
            raise InputError(f"the hop temperature must be positive, got {temperature}")
        hop = self.hop.with_calibrator(TemperatureCalibrator(float(temperature)))
        meta = {**self.meta, "hop_temperature_override": float(temperature)}
        return ComplexityClassifier(hop, self.knowledge, self.zero_logit, meta, self._encoder, self.library_settings)

    # ------------------------------------------------------------ prediction

    @property
    def encoder(self) -> Encoder:
        if self._encoder is None:
            from amsrag.embed.encoder import MiniLMEncoder

            self._encoder = MiniLMEncoder()
        return self._encoder

    def raw_logits(self, embeddings: np.ndarray, features: np.ndarray,
                   blind: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray | None]:
        """(hop logits, knowledge logits or None); `blind` rows get a neutral embedding (`Head.inputs`)."""
        zk = None if self.knowledge is None else self.knowledge.logits(embeddings, features, blind)
        return self.hop.logits(embeddings, features, blind), zk

    def probabilities(
        self, embeddings: np.ndarray, features: np.ndarray, calibrated: bool = True,
        comparison: np.ndarray | None = None, blind: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """(label index (n,), probs (n, 3)) for precomputed embeddings and features."""
        zh, zk = self.raw_logits(embeddings, features, blind)
        label, gate = decide(zh, zk, self.zero_logit, comparison)
        p_multi, p_zero = self.head_probabilities(zh, zk, calibrated)
        return label, combine(p_multi, p_zero, gate)

    def head_probabilities(self, zh: np.ndarray, zk: np.ndarray | None,
                           calibrated: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """(p_multi, p_zero) of raw logits; p_zero is 0 without a knowledge head."""
        identity = IdentityCalibrator()
        hop_cal = self.hop.calibrator if calibrated else identity
        p_multi = hop_cal.prob1(zh)
        if zk is None or self.knowledge is None:
            return p_multi, np.zeros_like(p_multi)
        return p_multi, (self.knowledge.calibrator if calibrated else identity).prob1(zk)

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
        self, questions: Sequence[str], query_vectors: np.ndarray | Sequence[np.ndarray] | None = None,
        library: QueryLibrary | None = None,
    ) -> list[ComplexityPrediction]:
        """Predictions for `questions`; with a non-empty `library`, each hop probability is blended with the
        close labelled neighbours' vote."""
        qs = [_check_question(q) for q in questions]
        if not qs:
            return []
        vectors = self._vectors(qs, query_vectors)
        features = features_batch(qs)
        blind = np.array([is_chinese_question(q) for q in qs], dtype=bool)
        zh, zk = self.raw_logits(vectors, features, blind)
        label, gate = decide(zh, zk, self.zero_logit, comparisons(features))
        p_multi, p_zero = self.head_probabilities(zh, zk)
        out = []
        for i in range(len(qs)):
            vote = (library.vote(vectors[i], self.library_settings)
                    if library is not None and len(library) and not blind[i] else None)
            p_h = blend(float(p_multi[i]), vote) if vote is not None else float(p_multi[i])
            probs = combine(np.array([p_h]), p_zero[i:i + 1], gate[i:i + 1])[0]
            own = COMPLEXITIES[int(label[i])]
            c: Complexity = own if gate[i] else ("multi_hop" if p_h >= 0.5 else "one_hop")
            p: dict[str, float] = {name: float(probs[j]) for j, name in enumerate(COMPLEXITIES)}
            out.append(ComplexityPrediction(label=c, probs=p, alpha=p[c], library=vote,
                                            decided_by="library" if c != own else "classifier",
                                            embedding=not blind[i]))
        return out

    def predict(self, question: str, query_vector: np.ndarray | None = None,
                library: QueryLibrary | None = None) -> ComplexityPrediction:
        return self.predict_batch([question], None if query_vector is None else [query_vector], library)[0]

    # ------------------------------------------------------------ artifact

    def save(self, directory: Path | str) -> Path:
        """Write `classifier.npz` (arrays) and `classifier.json` (everything else, with the npz's sha256)."""
        arrays: dict[str, np.ndarray] = {}
        heads: dict[str, Any] = {}
        for name in HEADS:
            head: Head | None = getattr(self, name)
            if head is None:
                continue
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
            "library_settings": asdict(self.library_settings),
            **{k: v for k, v in self.meta.items()
               if k not in ("artifact_version", "labels", "heads", "features", "library_settings")},
        }
        return save_artifact(directory, FORMAT, arrays, card)

    @classmethod
    def from_config(cls, config: ClassifierConfig, encoder: Encoder | None = None) -> ComplexityClassifier:
        """The configured artifact, with the index's own hop temperature when it was recalibrated."""
        clf = cls.load(config.artifact or None, encoder=encoder)
        return clf.with_hop_temperature(config.hop_temperature) if config.hop_temperature else clf

    @classmethod
    def load(cls, path: Path | str | None = None, encoder: Encoder | None = None) -> ComplexityClassifier:
        """Load an artifact directory (None: the one shipped in the package)."""
        artifact = load_artifact(Path(path) if path is not None else shipped_artifact_dir(), FORMAT)
        check_features(artifact, FORMAT, FEATURE_VERSION, FEATURE_NAMES)
        spec = artifact.card
        if spec.get("labels") != list(COMPLEXITIES):
            raise InputError(f"{artifact.card_path}: label map {spec.get('labels')} differs from {list(COMPLEXITIES)}")
        array = artifact.array
        heads: dict[str, Head | None] = {"knowledge": None}
        for name in HEADS:
            h = spec["heads"].get(name)
            if h is None:
                if name == "hop":
                    raise InputError(f"{artifact.card_path}: the artifact has no hop head")
                continue
            params = {k: array(f"{name}_cal_{k}") for k in h["calibration_params"]}
            heads[name] = Head(
                coef=array(f"{name}_coef"), intercept=float(array(f"{name}_intercept")[0]),
                mean=array(f"{name}_mean"), scale=array(f"{name}_scale"), use_features=bool(h["use_features"]),
                calibrator=calibrator_from_params(h["calibration"], params),
                use_embedding=bool(h.get("use_embedding", True)),
            )
        meta = {k: v for k, v in spec.items() if k not in ("heads", "zero_logit", "library_settings", SHA256_KEY)}
        settings = LibrarySettings(**spec.get("library_settings", {}))
        hop = heads["hop"]
        assert hop is not None
        return cls(hop, heads["knowledge"], float(spec["zero_logit"]), meta=meta, encoder=encoder,
                   library_settings=settings)
