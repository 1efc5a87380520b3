"""The learned reranker over fused candidates (issue 16): a LightGBM lambdarank model scores the top `pool`
candidates of the base fusion (CA-RRF, with the second hop) from `fuse.features`; the fused list is those
candidates by model score.

The artifact is a directory with `fusion.txt` (the LightGBM model as text) and its card `fusion.json`
(feature names, what the features depend on — retrievers, encoder, BM25 settings —, the base fusion's
CA-RRF settings, training data with sha256, settings, metrics, and `model_sha256`). The base fusion is the
one it was trained on, whatever priors `train route tune` fits for the CA-RRF systems: its ranks are features.
`LearnedRanker.load` checks the card, the model's sha256 and the feature list, and `check_index` refuses an
index the features would be computed differently on.
LightGBM was chosen over scikit-learn's histogram GBDT for its lambdarank objective (it optimises nDCG
over each query's candidates directly; scikit-learn has no ranking loss) and its fast single-row predict.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from amsrag.artifacts import file_sha256
from amsrag.config import FusionConfig
from amsrag.errors import AmsragError, InputError
from amsrag.fuse.base import FusedItem, FusedList
from amsrag.fuse.features import (
    FEATURE_RETRIEVERS,
    FEATURES,
    FEATURES_VERSION,
    CandidateSignals,
    QueryInputs,
    candidate_features,
)
from amsrag.types import Hit

MODEL_FILE = "fusion.txt"
CARD_FILE = "fusion.json"
CARD_VERSION = 1
TRAIN_COMMAND = "amsrag train fusion train"


class FusionArtifactError(AmsragError):
    """The learned fuser's model or card is missing, corrupt or made for other features (the message names it)."""


def default_directory() -> Path:
    return Path(str(resources.files("amsrag") / "data" / "fusion"))


@dataclass(frozen=True, slots=True)
class IndexProfile:
    """What the features depend on, as an index has it: its retrievers, encoder and BM25 settings."""

    retrievers: tuple[str, ...]
    encoder: str
    bm25: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"retrievers": list(self.retrievers), "encoder": self.encoder, "bm25": dict(self.bm25)}


@dataclass(slots=True)
class LearnedRanker:
    """A loaded lambdarank model with its card."""

    booster: Any
    card: dict[str, Any]
    directory: Path
    base_fusion: FusionConfig  # the CA-RRF settings of the base fusion it was trained on (card `base_fusion`)
    pool: int = 60
    _checked: set[str] = field(default_factory=set)

    @classmethod
    def load(cls, directory: Path | str | None = None) -> LearnedRanker:
        """The artifact in `directory` (default: the one shipped in amsrag); FusionArtifactError when missing,
        corrupt, of another version or made for other features."""
        from amsrag.lazy import import_lightgbm

        lgb = import_lightgbm()
        d = Path(directory) if directory else default_directory()
        card_path, model_path = d / CARD_FILE, d / MODEL_FILE
        for path in (card_path, model_path):
            if not path.is_file():
                raise FusionArtifactError(f"{path}: learned fuser file missing; rebuild it with `{TRAIN_COMMAND}`")
        try:
            card = json.loads(card_path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise FusionArtifactError(f"{card_path}: not a valid JSON card ({exc})") from None
        if not isinstance(card, dict) or card.get("card_version") != CARD_VERSION:
            raise FusionArtifactError(f"{card_path}: not a learned-fuser card of version {CARD_VERSION}")
        if file_sha256(model_path) != card.get("model_sha256"):
            raise FusionArtifactError(f"{model_path}: sha256 differs from the card's model_sha256; the model is "
                                      f"corrupt or not the one the card describes")
        if tuple(card.get("features", ())) != FEATURES or card.get("features_version") != FEATURES_VERSION:
            raise FusionArtifactError(f"{card_path}: made for other features than this amsrag computes "
                                      f"(version {card.get('features_version')}); retrain with `{TRAIN_COMMAND}`")
        try:
            booster = lgb.Booster(model_str=model_path.read_text(encoding="utf-8"))
        except Exception as exc:  # LightGBM raises its own error type on a malformed model
            raise FusionArtifactError(f"{model_path}: not a LightGBM model ({exc})") from None
        if booster.num_feature() != len(FEATURES):
            raise FusionArtifactError(f"{model_path}: the model reads {booster.num_feature()} features, the card "
                                      f"names {len(FEATURES)}")
        try:
            base = FusionConfig.model_validate(card["base_fusion"])
        except (KeyError, ValueError) as exc:
            raise FusionArtifactError(f"{card_path}: no valid base_fusion settings ({exc})") from None
        return cls(booster, card, d, base, int(card.get("settings", {}).get("pool", 60)))

    def check_index(self, profile: IndexProfile, location: str) -> None:
        """InputError unless the index computes the features the model was trained on."""
        key = json.dumps(profile.to_dict(), sort_keys=True)
        if key in self._checked:
            return
        want = self.card.get("index", {})
        problems = []
        missing = sorted(set(want.get("retrievers", FEATURE_RETRIEVERS)) - set(profile.retrievers))
        if missing:
            problems.append(f"retrievers {missing} missing")
        if want.get("encoder") and want["encoder"] != profile.encoder:
            problems.append(f"encoder {profile.encoder!r}, trained with {want['encoder']!r}")
        for name, value in want.get("bm25", {}).items():
            if profile.bm25.get(name) != value:
                problems.append(f"bm25.{name} = {profile.bm25.get(name)!r}, trained with {value!r}")
        if problems:
            raise InputError(f"{location}: the learned fuser {self.directory} was trained on other features than "
                             f"this index computes ({'; '.join(problems)}); use another fusion system or retrain "
                             f"with `{TRAIN_COMMAND}`")
        self._checked.add(key)

    def score(self, x: np.ndarray) -> np.ndarray:
        return np.asarray(self.booster.predict(x, num_threads=1), dtype=np.float64)

    def contributions(self, x: np.ndarray, top: int = 5) -> list[dict[str, float]]:
        """Per row, the `top` features by absolute SHAP contribution to its score (LightGBM's pred_contrib)."""
        if not len(x):
            return []
        contrib = np.asarray(self.booster.predict(x, pred_contrib=True, num_threads=1))[:, : len(FEATURES)]
        out = []
        for row in contrib:
            best = np.argsort(-np.abs(row), kind="stable")[:top]
            out.append({FEATURES[j]: round(float(row[j]), 4) for j in best})
        return out


class LearnedFuser:
    """The `Fuser` of the learned reranker for one query: `fuse(lists)` reranks `base`'s top candidates.

    `lists` hold the retrievers' lists and, when it ran, the second hop's (`fuse.features.HOP_LIST`); `base`
    is the base fusion of those lists (its ranks and scores are features). `explain`: trace the top
    feature contributions of this many leading items (costs ~2 ms each).
    """

    method = "learned"

    def __init__(self, ranker: LearnedRanker, base: FusedList, context: QueryInputs, signals: CandidateSignals,
                 explain: int = 0) -> None:
        self.ranker = ranker
        self.base = base
        self.context = context
        self.signals = signals
        self.explain = explain

    def fuse(self, lists: Mapping[str, Sequence[Hit]]) -> FusedList:
        candidates, x = pool_features(self.base, lists, self.context, self.signals, self.ranker.pool)
        params: dict[str, Any] = {**self.base.params, "base": self.base.method, "candidates": len(candidates),
                                  "model_sha256": str(self.ranker.card.get("model_sha256", ""))[:12]}
        if not candidates:
            return FusedList(self.method, [], dict(self.base.weights), dict(self.base.k), params)
        scores = self.ranker.score(x)
        order = sorted(range(len(candidates)), key=lambda i: (-scores[i], candidates[i].id))
        ranks = {name: _rank_map(hits) for name, hits in lists.items()}
        items = [_rescored(candidates[i], float(scores[i]), ranks) for i in order]
        if self.explain:
            params["explain"] = [{"id": items[j].id, "top_features": c} for j, c in
                                 enumerate(self.ranker.contributions(x[order[: self.explain]]))]
        return FusedList(self.method, items, dict(self.base.weights), dict(self.base.k), params)


def pool_features(base: FusedList, lists: Mapping[str, Sequence[Hit]], context: QueryInputs,
                  signals: CandidateSignals, pool: int) -> tuple[list[FusedItem], np.ndarray]:
    """The candidates the reranker scores (`base`'s top `pool`) and their feature matrix: what the trainer
    learns from and the fuser scores, computed the same way for both."""
    candidates = base.top(pool)
    return candidates, candidate_features(candidates, lists, base, context, signals)


def _rank_map(hits: Sequence[Hit]) -> dict[str, int]:
    """Passage id -> its best rank in one list."""
    out: dict[str, int] = {}
    for h in hits:
        if h.id not in out or h.rank < out[h.id]:
            out[h.id] = int(h.rank)
    return out


def _rescored(item: FusedItem, score: float, ranks: Mapping[str, dict[str, int]]) -> FusedItem:
    """The candidate with the model's score; its ranks now include every list's (the second hop's too)."""
    merged = dict(item.ranks)
    for name, by_id in ranks.items():
        if name not in merged and item.id in by_id:
            merged[name] = by_id[item.id]
    return FusedItem(item.id, item.row, score, item.title, merged, dict(item.contributions))
