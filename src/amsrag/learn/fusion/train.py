"""`amsrag train fusion train`: the learned fuser's LightGBM lambdarank model and expert memory, with their card.

Questions: the default mix's questions whose gold passages are in the evaluation corpus, none of them a
question (eval or calibration) of an evaluated benchmark (`evaluate.builder.evaluated_questions`); split by
a seeded hash of the question id into training (85 %) and validation (15 %) questions. The model learns
from the training questions' groups (`data.collect`; groups without a gold candidate carry no ranking
signal and are left out), the card reports nDCG@5 / all-gold@5 of the base fusion and of the model on the
validation groups, per subset. The expert memory holds every question's embedding and per-retriever quality.
LightGBM runs deterministically (`deterministic`, row-wise histograms, fixed seeds, one thread).
"""

from __future__ import annotations

import json
import math
import os
import shutil
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from amsrag.artifacts import file_sha256
from amsrag.config import FusionConfig
from amsrag.errors import InputError
from amsrag.evaluate.builder import EvalQuery
from amsrag.fuse.experts import EXPERTS_FILE, ExpertMemory, save_memory
from amsrag.fuse.features import FEATURE_RETRIEVERS, FEATURES, FEATURES_VERSION
from amsrag.fuse.learned import CARD_FILE, CARD_VERSION, MODEL_FILE, IndexProfile
from amsrag.learn.common import lambdarank_params, seeded_rank
from amsrag.learn.fusion.data import Collected, Group, ndcg_at

VALID_SHARE = 0.15


@dataclass(frozen=True, slots=True)
class TrainSettings:
    seed: int = 13
    pool: int = 60
    rounds: int = 100
    num_leaves: int = 31
    learning_rate: float = 0.1
    min_data_in_leaf: int = 40
    feature_fraction: float = 0.8
    lambda_l2: float = 1.0

    def lgb_params(self) -> dict[str, Any]:
        return lambdarank_params(self.seed, self.num_leaves, self.learning_rate, self.min_data_in_leaf,
                                 self.feature_fraction, self.lambda_l2, eval_at=5, truncation=10)


@dataclass(slots=True)
class Trained:
    booster: Any
    memory: ExpertMemory
    metrics: dict[str, Any]
    split: dict[str, int]
    importance: dict[str, float] = field(default_factory=dict)


def split_questions(questions: Sequence[EvalQuery], seed: int) -> list[bool]:
    """True for a validation question: the VALID_SHARE of questions first in a seeded hash order."""
    order = sorted(range(len(questions)), key=lambda i: seeded_rank(seed, questions[i].id + questions[i].question))
    n_valid = round(VALID_SHARE * len(questions))
    valid = [False] * len(questions)
    for i in order[:n_valid]:
        valid[i] = True
    return valid


def _stack(groups: Sequence[Group]) -> tuple[np.ndarray, np.ndarray, list[int]]:
    return (np.concatenate([g.x for g in groups]), np.concatenate([g.labels for g in groups]),
            [len(g.labels) for g in groups])


def _all_gold(ranked: Sequence[str], gold: set[str], k: int) -> float:
    return float(gold <= set(ranked[:k])) if len(gold) >= 2 else math.nan


def evaluate_groups(booster: Any, groups: Sequence[Group], questions: Sequence[EvalQuery]) -> dict[str, Any]:
    """nDCG@5 and all-gold@5 of the base order and the model's, overall and per subset (and hop setting)."""
    by_kind: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for g in groups:
        q = questions[g.question]
        scores = booster.predict(g.x, num_threads=1)
        learned = [g.ids[i] for i in sorted(range(len(g.ids)), key=lambda i: (-scores[i], g.ids[i]))]
        kind = "+".join(g.subset) + ("/hop" if g.multi_hop else "")
        gold = set(q.gold)
        for name in ("all", kind):
            acc = by_kind[name]
            acc["base_ndcg@5"].append(ndcg_at(g.ids, q.gold, 5))
            acc["learned_ndcg@5"].append(ndcg_at(learned, q.gold, 5))
            acc["base_all_gold@5"].append(_all_gold(g.ids, gold, 5))
            acc["learned_all_gold@5"].append(_all_gold(learned, gold, 5))
    out: dict[str, Any] = {}
    for kind, acc in sorted(by_kind.items()):
        out[kind] = {m: round(float(np.nanmean(v)), 4) if np.isfinite(v).any() else None for m, v in acc.items()}
        out[kind]["groups"] = len(acc["base_ndcg@5"])
    return out


def train(collected: Collected, questions: Sequence[EvalQuery], settings: TrainSettings) -> Trained:
    import lightgbm as lgb

    valid = split_questions(questions, settings.seed)
    train_groups = [g for g in collected.groups if not valid[g.question] and g.labels.any()]
    valid_groups = [g for g in collected.groups if valid[g.question] and g.labels.any()]
    if not train_groups or not valid_groups:
        raise ValueError("too few questions with a gold candidate to train and validate the learned fuser")
    x, y, sizes = _stack(train_groups)
    dataset = lgb.Dataset(x, y, group=sizes, feature_name=list(FEATURES), free_raw_data=False)
    booster = lgb.train(settings.lgb_params(), dataset, num_boost_round=settings.rounds)
    metrics = {"validation": evaluate_groups(booster, valid_groups, questions),
               "training": evaluate_groups(booster, train_groups, questions)["all"]}
    gains = booster.feature_importance(importance_type="gain")
    total = float(gains.sum()) or 1.0
    importance = {FEATURES[i]: round(float(gains[i]) / total, 4) for i in np.argsort(-gains)[:12]}
    memory = ExpertMemory(collected.vectors, np.nan_to_num(collected.quality, nan=0.0), FEATURE_RETRIEVERS)
    split = {"train_questions": sum(not v for v in valid), "valid_questions": sum(valid),
             "train_groups": len(train_groups), "valid_groups": len(valid_groups), "train_rows": len(y)}
    return Trained(booster, memory, metrics, split, importance)


BASE_FUSION_FIELDS = {"rrf_k", "kappa", "alpha0", "k_by_class", "beta_by_class"}


def base_fusion() -> FusionConfig:
    """The base fusion the fuser learns on: CA-RRF at the default settings (uniform priors), whatever an index's
    `train route tune` fitted — so the model's rank features mean the same on every index."""
    return FusionConfig()


def write_artifact(out: Path, trained: Trained, settings: TrainSettings, profile: IndexProfile,
                   data: dict[str, Any], questions: Sequence[EvalQuery]) -> Path:
    """fusion.txt, experts.npz and the card fusion.json in `out`, written beside it first and moved in with
    the card last, so an interrupted write leaves the previous artifact whole."""
    check_out_dir(out)
    staging = out.with_name(f".{out.name}.tmp")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    model_path = staging / MODEL_FILE
    model_path.write_text(trained.booster.model_to_string(), encoding="utf-8")
    experts_sha = save_memory(staging, trained.memory)
    card = {
        "card_version": CARD_VERSION, "kind": "learned fuser (LightGBM lambdarank) + expert memory",
        "features": list(FEATURES), "features_version": FEATURES_VERSION, "index": profile.to_dict(),
        "base_fusion": base_fusion().model_dump(mode="json", include=BASE_FUSION_FIELDS),
        "settings": {**{k: getattr(settings, k) for k in settings.__dataclass_fields__},
                     "lightgbm": settings.lgb_params()},
        "data": {**data, "questions": len(questions),
                 "by_dataset": dict(sorted(Counter(q.dataset for q in questions).items())), **trained.split},
        "metrics": trained.metrics, "feature_importance_gain": trained.importance,
        "experts": {"npz_sha256": experts_sha, "questions": len(trained.memory.vectors),
                    "retrievers": list(trained.memory.retrievers),
                    "mean_quality": dict(zip(FEATURE_RETRIEVERS, np.round(trained.memory.quality.mean(0), 4).tolist(),
                                             strict=True))},
        "model_sha256": file_sha256(model_path),
        "rebuild": "OMP_NUM_THREADS=1 amsrag train fusion train --out src/amsrag/data/fusion",
    }
    (staging / CARD_FILE).write_text(json.dumps(card, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    out.mkdir(parents=True, exist_ok=True)
    for name in (MODEL_FILE, EXPERTS_FILE, CARD_FILE):
        os.replace(staging / name, out / name)
    staging.rmdir()
    return out


def check_out_dir(out: Path) -> None:
    """InputError unless `out` is (or can become) an artifact folder."""
    if out.exists() and not out.is_dir():
        raise InputError(f"{out}: exists and is not a folder; --out names the artifact folder to write")
