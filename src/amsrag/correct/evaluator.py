"""The retrieval evaluator: a calibrated relevance probability in [0, 1] for (query, passage).

No cross-encoder runs offline here (../shared/MODELS.md), so relevance comes from a small model
(gradient-boosted trees by default, logistic regression as an option) over offline features
(`correct.features`: dense and best-sentence cosine, BM25 within the candidate list, term / entity /
title overlap, answer-type presence), trained on gold vs distractor paragraphs of HotpotQA, MuSiQue
and NQ and calibrated on a held-out split (Platt by default).
The artifact is `evaluator.json` + `evaluator.npz` (no pickle), saved and loaded by `amsrag.artifacts` as the
classifier's.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np

from amsrag.artifacts import SHA256_KEY, ArtifactFormat, check_features, load_artifact, save_artifact
from amsrag.calibration import sigmoid
from amsrag.correct.features import FEATURE_NAMES, FEATURE_VERSION, N_FEATURES, PassageView, list_features
from amsrag.correct.text import analyse_query, passage_labels, sentence_text_for_embedding
from amsrag.embed.cache import BatchLRU, CachedEncoder, shared_cache
from amsrag.embed.encoder import DIMENSION, Encoder, passage_text_for_embedding
from amsrag.errors import InputError
from amsrag.text.sentences import split_sentences

ARTIFACT_VERSION = 1
ARTIFACT_JSON = "evaluator.json"
ARTIFACT_NPZ = "evaluator.npz"
EvalCalibration = Literal["platt", "isotonic", "temperature", "none"]
EVAL_CALIBRATIONS: tuple[EvalCalibration, ...] = ("platt", "isotonic", "temperature", "none")
FORMAT = ArtifactFormat(kind="evaluator", article="an", card=ARTIFACT_JSON, arrays=ARTIFACT_NPZ,
                        version=ARTIFACT_VERSION, readable=(ARTIFACT_VERSION,),
                        train_command="amsrag train evaluator train")


class PassageLike(Protocol):
    id: str
    title: str
    text: str


@runtime_checkable
class RelevanceScorer(Protocol):
    """What the corrective step needs of an evaluator."""

    def score(self, query: str, query_vector: np.ndarray | None, passages: Sequence[Any],
              passage_vectors: np.ndarray | None = None) -> np.ndarray: ...


def passage_field(p: Any, name: str) -> str:
    """`p.name` or `p[name]` (passages may be dataclasses or JSON dicts)."""
    value = p.get(name, "") if isinstance(p, Mapping) else getattr(p, name, "")
    return "" if value is None else str(value)


def shipped_artifact_dir() -> Path:
    return Path(str(resources.files("amsrag") / "data" / "evaluator"))


@dataclass(frozen=True, slots=True)
class ScoreCalibrator:
    """Maps the model's raw logit z to a probability: platt sigmoid(a z + b), temperature sigmoid(z / T),
    isotonic (a non-decreasing map, linearly interpolated), none sigmoid(z)."""

    method: EvalCalibration = "none"
    params: dict[str, np.ndarray] = field(default_factory=dict)

    def __call__(self, z: np.ndarray) -> np.ndarray:
        z = np.asarray(z, dtype=np.float64)
        if self.method == "platt":
            return sigmoid(self.params["a"][0] * z + self.params["b"][0])
        if self.method == "temperature":
            return sigmoid(z / self.params["temperature"][0])
        if self.method == "isotonic":
            return np.interp(z, self.params["x"], self.params["y"])
        return sigmoid(z)

    @classmethod
    def fit(cls, method: EvalCalibration, z: np.ndarray, y: np.ndarray) -> ScoreCalibrator:
        z = np.asarray(z, dtype=np.float64)
        y = np.asarray(y, dtype=np.float64)
        if method == "platt":
            from sklearn.linear_model import LogisticRegression

            lr = LogisticRegression(C=1e4, max_iter=1000).fit(z[:, None], y.astype(int))
            return cls("platt", {"a": np.array([float(lr.coef_[0, 0])]), "b": np.array([float(lr.intercept_[0])])})
        if method == "temperature":
            from amsrag.calibration import fit_temperature

            return cls("temperature", {"temperature": np.array([fit_temperature(z, y)])})
        if method == "isotonic":
            from sklearn.isotonic import IsotonicRegression

            iso = IsotonicRegression(y_min=0.0, y_max=1.0, increasing=True, out_of_bounds="clip").fit(z, y)
            return cls("isotonic", {"x": np.asarray(iso.X_thresholds_, np.float64),
                                    "y": np.asarray(iso.y_thresholds_, np.float64)})
        if method == "none":
            return cls("none", {})
        raise InputError(f"unknown calibration method {method!r}; use one of: {', '.join(EVAL_CALIBRATIONS)}")


@dataclass(frozen=True, slots=True)
class RelevanceModel:
    """Logistic regression over standardised features."""

    coef: np.ndarray
    intercept: float
    mean: np.ndarray
    scale: np.ndarray
    kind: str = "logistic"

    def logits(self, x: np.ndarray) -> np.ndarray:
        return ((np.asarray(x, dtype=np.float64) - self.mean) / self.scale) @ self.coef + self.intercept

    def arrays(self) -> dict[str, np.ndarray]:
        return {"coef": self.coef, "intercept": np.array([self.intercept]), "mean": self.mean, "scale": self.scale}

    @classmethod
    def from_arrays(cls, a: dict[str, np.ndarray]) -> RelevanceModel:
        return cls(a["coef"], float(a["intercept"][0]), a["mean"], a["scale"])


@dataclass(frozen=True, slots=True)
class TreeEnsemble:
    """Gradient-boosted regression trees (exported from scikit-learn's HistGradientBoostingClassifier) as
    flat node arrays; logit = baseline + the sum of the leaf values reached. Node k of tree t is row
    offsets[t] + k; a sample goes left when x[feature] <= threshold."""

    baseline: float
    feature: np.ndarray  # int64 per node
    threshold: np.ndarray  # float64 per node
    left: np.ndarray  # int64, global node index
    right: np.ndarray  # int64, global node index
    is_leaf: np.ndarray  # bool per node
    value: np.ndarray  # float64 per node (leaf values include the learning rate)
    roots: np.ndarray  # int64, global index of each tree's root
    kind: str = "gbdt"

    def logits(self, x: np.ndarray) -> np.ndarray:
        x = np.nan_to_num(np.asarray(x, dtype=np.float64))
        n = len(x)
        node = np.broadcast_to(self.roots, (n, len(self.roots))).copy()
        rows = np.arange(n)[:, None]
        for _ in range(64):  # trees are far shallower; the bound only guards a corrupt artifact
            leaf = self.is_leaf[node]
            if leaf.all():
                break
            go_left = x[rows, self.feature[node]] <= self.threshold[node]
            node = np.where(leaf, node, np.where(go_left, self.left[node], self.right[node]))
        return self.baseline + self.value[node].sum(axis=1)

    def arrays(self) -> dict[str, np.ndarray]:
        return {"baseline": np.array([self.baseline]), "feature": self.feature, "threshold": self.threshold,
                "left": self.left, "right": self.right, "is_leaf": self.is_leaf, "value": self.value,
                "roots": self.roots}

    @classmethod
    def from_arrays(cls, a: dict[str, np.ndarray]) -> TreeEnsemble:
        n = len(a["feature"])
        ints = {k: np.asarray(a[k]).astype(np.int64) for k in ("feature", "left", "right", "roots")}
        if any(len(a[k]) != n for k in ("threshold", "left", "right", "is_leaf", "value")) or (
                n and (ints["left"].max() >= n or ints["right"].max() >= n or ints["roots"].max() >= n)):
            raise InputError("evaluator artifact: inconsistent tree arrays; retrain with "
                             "`amsrag train evaluator train`")
        return cls(float(a["baseline"][0]), ints["feature"], np.asarray(a["threshold"], np.float64), ints["left"],
                   ints["right"], np.asarray(a["is_leaf"]).astype(bool), np.asarray(a["value"], np.float64),
                   ints["roots"])

    @classmethod
    def from_sklearn(cls, model: Any) -> TreeEnsemble:
        """Export a fitted binary HistGradientBoostingClassifier (numeric features, no categorical ones)."""
        predictors, baseline = sklearn_hist_gbdt_internals(model)
        parts, roots, at = [], [], 0
        for nodes in predictors:
            if nodes["is_categorical"].any():
                raise ValueError("categorical splits are not supported")
            parts.append((nodes, at))
            roots.append(at)
            at += len(nodes)
        cat = np.concatenate
        return cls(
            baseline,
            cat([n["feature_idx"].astype(np.int64) for n, _ in parts]),
            cat([n["num_threshold"].astype(np.float64) for n, _ in parts]),
            cat([n["left"].astype(np.int64) + o for n, o in parts]),
            cat([n["right"].astype(np.int64) + o for n, o in parts]),
            cat([n["is_leaf"].astype(bool) for n, _ in parts]),
            cat([n["value"].astype(np.float64) for n, _ in parts]),
            np.asarray(roots, dtype=np.int64),
        )


def sklearn_hist_gbdt_internals(model: Any) -> tuple[list[np.ndarray], float]:
    """(node array of each tree, baseline raw score) of a fitted binary HistGradientBoostingClassifier.

    The one place that reads scikit-learn private attributes: the estimator has no public accessor for
    its trees (`_predictors`: per boosting iteration a list of one TreePredictor for a binary problem,
    whose `.nodes` is a structured array) nor for its initial raw prediction (`_baseline_prediction`).
    `fit_gbdt` checks the export against `decision_function`, so a scikit-learn change that breaks this
    fails at training time, never silently at inference (the artifact holds plain arrays).
    """
    predictors = [predictor.nodes for (predictor,) in model._predictors]
    baseline = float(np.asarray(model._baseline_prediction).ravel()[0])
    return predictors, baseline


MODEL_KINDS: dict[str, type[RelevanceModel] | type[TreeEnsemble]] = {"logistic": RelevanceModel,
                                                                     "gbdt": TreeEnsemble}


def _key(*parts: str) -> str:
    return hashlib.sha1("\x1f".join(parts).encode()).hexdigest()


# NER labels depend on the text alone: every evaluator in the process shares them
_SHARED_LABELS: BatchLRU[frozenset[str]] = BatchLRU(8192)


class RetrievalEvaluator:
    """`score(query, query_vector, passages, passage_vectors)` -> calibrated relevance per passage.

    Passages need `title` and `text` (attributes or keys). `passage_vectors` are the stored
    (title + text) embeddings when the caller has them; otherwise they are computed. Sentence vectors
    and NER labels are computed here and cached (LRU), so `refine_strips` reuses them.
    """

    def __init__(self, model: RelevanceModel | TreeEnsemble, calibrator: ScoreCalibrator,
                 meta: dict[str, Any] | None = None, encoder: Encoder | None = None, cache_size: int = 4096,
                 private_caches: bool = False) -> None:
        self.model = model
        self.calibrator = calibrator
        self.meta: dict[str, Any] = dict(meta or {})
        self._encoder = encoder
        self._private = private_caches  # own sentence-vector and NER caches (cold-cost measurements)
        self._sentences: BatchLRU[tuple[list[str], np.ndarray]] = BatchLRU(cache_size)
        self._labels = BatchLRU(cache_size) if private_caches else _SHARED_LABELS

    # ------------------------------------------------------------ inputs
    @property
    def encoder(self) -> Encoder:
        """The process's sentence cache over the encoder (the extractive reader embeds the same sentences)."""
        if self._encoder is None:
            from amsrag.embed.encoder import MiniLMEncoder

            self._encoder = MiniLMEncoder()
        if self._private:
            if not isinstance(self._encoder, CachedEncoder):
                self._encoder = CachedEncoder(self._encoder)
            return self._encoder
        return shared_cache(self._encoder)

    @property
    def thresholds(self) -> dict[str, Any]:
        """The tri-state thresholds tuned with this artifact ({"upper", "lower", "aggregate"}), if any."""
        return dict(self.meta.get("thresholds", {}))

    def sentences(self, passages: Sequence[Any]) -> list[tuple[list[str], np.ndarray]]:
        """Per passage: its sentences and their vectors (title-prefixed embeddings; cached)."""
        fields = {_key(passage_field(p, "title"), passage_field(p, "text")): (passage_field(p, "title"),
                                                                           passage_field(p, "text")) for p in passages}

        def compute(keys: list[str]) -> list[tuple[list[str], np.ndarray]]:
            split = [(fields[k][0], split_sentences(fields[k][1]) or ([fields[k][1]] if fields[k][1].strip() else []))
                     for k in keys]
            texts = [sentence_text_for_embedding(title, s) for title, ss in split for s in ss]
            vectors = self.encoder.encode(texts) if texts else np.zeros((0, DIMENSION), np.float32)
            out, at = [], 0
            for _, ss in split:
                out.append((ss, vectors[at : at + len(ss)]))
                at += len(ss)
            return out

        keys = [_key(passage_field(p, "title"), passage_field(p, "text")) for p in passages]
        return self._sentences.lookup(keys, compute)

    def labels(self, passages: Sequence[Any]) -> list[frozenset[str]]:
        texts = {_key(passage_field(p, "text")): passage_field(p, "text") for p in passages}
        keys = [_key(passage_field(p, "text")) for p in passages]
        return self._labels.lookup(keys, lambda missing: passage_labels([texts[k] for k in missing]))

    def _passage_vectors(self, passages: Sequence[Any], passage_vectors: np.ndarray | None) -> np.ndarray:
        if passage_vectors is None:
            texts = [passage_text_for_embedding(passage_field(p, "title"), passage_field(p, "text")) for p in passages]
            return self.encoder.encode(texts)
        v = np.asarray(passage_vectors, dtype=np.float32)
        if v.shape != (len(passages), DIMENSION):
            raise InputError(f"passage vectors must have shape ({len(passages)}, {DIMENSION}), got {v.shape}")
        return v

    def features(self, query: str, query_vector: np.ndarray | None, passages: Sequence[Any],
                 passage_vectors: np.ndarray | None = None) -> np.ndarray:
        if not isinstance(query, str) or not query.strip():
            raise InputError("empty query: the retrieval evaluator needs a non-empty query")
        if len(passages) == 0:
            return np.zeros((0, N_FEATURES))
        qv = self.encoder.encode_query(query) if query_vector is None else np.asarray(query_vector, np.float32)
        if qv.shape != (DIMENSION,):
            raise InputError(f"query vector must have shape ({DIMENSION},), got {qv.shape}")
        pv = self._passage_vectors(passages, passage_vectors)
        sents = self.sentences(passages)
        labels = self.labels(passages)
        info = analyse_query(query, [passage_field(p, "title") for p in passages])
        views = [PassageView(passage_field(p, "title"), passage_field(p, "text"), pv[i], sents[i][1], labels[i])
                 for i, p in enumerate(passages)]
        return list_features(info, qv, views)

    # ------------------------------------------------------------ scoring
    def score_features(self, x: np.ndarray) -> np.ndarray:
        if len(x) == 0:
            return np.zeros(0)
        return np.clip(self.calibrator(self.model.logits(x)), 0.0, 1.0)

    def score(self, query: str, query_vector: np.ndarray | None, passages: Sequence[Any],
              passage_vectors: np.ndarray | None = None) -> np.ndarray:
        """Calibrated relevance in [0, 1] of each passage to the query (aligned with `passages`)."""
        return self.score_features(self.features(query, query_vector, passages, passage_vectors))

    # ------------------------------------------------------------ artifact
    def save(self, directory: Path | str) -> Path:
        arrays = {**{f"model_{k}": v for k, v in self.model.arrays().items()},
                  **{f"cal_{k}": v for k, v in self.calibrator.params.items()}}
        card = {
            **self.meta,
            "artifact_version": ARTIFACT_VERSION,
            "features": {"version": FEATURE_VERSION, "names": list(FEATURE_NAMES)},
            "calibration": {"method": self.calibrator.method, "params": sorted(self.calibrator.params)},
            "model": {"kind": self.model.kind, "arrays": sorted(self.model.arrays())},
        }
        return save_artifact(directory, FORMAT, arrays, card)

    @classmethod
    def load(cls, path: Path | str | None = None, encoder: Encoder | None = None) -> RetrievalEvaluator:
        """Load an artifact directory (None or "": the one shipped in the package)."""
        artifact = load_artifact(Path(path) if path else shipped_artifact_dir(), FORMAT)
        check_features(artifact, FORMAT, FEATURE_VERSION, FEATURE_NAMES)
        spec = artifact.card
        cal = spec["calibration"]
        spec_model = spec.get("model", {})
        kind = spec_model.get("kind")
        model_type = MODEL_KINDS.get(kind) if isinstance(kind, str) else None
        if model_type is None:
            raise InputError(f"{artifact.card_path}: unknown model kind {kind!r}")
        model = model_type.from_arrays({k: artifact.array(f"model_{k}") for k in spec_model["arrays"]})
        calibrator = ScoreCalibrator(cal["method"], {k: artifact.array(f"cal_{k}") for k in cal["params"]})
        meta = {k: v for k, v in spec.items() if k not in ("calibration", SHA256_KEY, "model")}
        return cls(model, calibrator, meta=meta, encoder=encoder)
