"""The chain's confidence, calibrated end to end, and the abstention threshold per plan type.

A chain's answer is right with a probability that is not the product of its steps' confidences (a comparison
can be right with unsure readings, a bridge wrong with sure ones): a logistic model over the chain's own
features, fitted on held-out chains (`amsrag train decomposer calibrate`), gives it. The answer that stands is the
more probable of the chain's and the plain reader's (its confidence is calibrated already); it is given when
that probability reaches its plan type's threshold, set on the same calibration questions so that at most
`coverage` of them are abstained on. The artifact is `chain.json` beside the decomposer's files.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from amsrag.decompose.plan import Plan
from amsrag.decompose.tagger import DecomposerArtifactError, default_directory

CALIBRATION_FILE = "chain.json"
FEATURES = ("bias", "plan_confidence", "min_step", "mean_step", "steps", "comparison", "yes_no", "plain_confidence",
            "agrees_with_plain", "executor_confidence")


def chain_features(plan: Plan, step_confidences: list[float], answer: str, plain_answer: str,
                   plain_confidence: float, executor_confidence: float) -> list[float]:
    """The calibration's inputs (`FEATURES`); `executor_confidence` is the chain runner's own figure (the weaker
    step's, halved for a runner-up pair of an intersection), which carries what the steps' numbers alone do not."""
    steps = step_confidences or [0.0]
    agree = float(bool(answer) and answer.strip().lower() == plain_answer.strip().lower())
    return [1.0, plan.confidence, min(steps), sum(steps) / len(steps), len(steps) / 4.0,
            float(plan.kind == "comparison"), float(answer.lower() in ("yes", "no")), plain_confidence, agree,
            executor_confidence]


@dataclass(frozen=True, slots=True)
class ChainCalibration:
    weights: tuple[float, ...]
    thresholds: dict[str, float]  # plan type -> answer when the standing answer's probability reaches this
    card: dict[str, Any]

    @classmethod
    def load(cls, directory: Path | str | None = None) -> ChainCalibration | None:
        """The calibration beside the decomposer (None when there is none: the raw step confidence is used)."""
        path = (Path(directory) if directory is not None else default_directory()) / CALIBRATION_FILE
        if not path.is_file():
            return None
        try:
            card = json.loads(path.read_text(encoding="utf-8"))
            weights = tuple(float(w) for w in card["weights"])
            thresholds = {str(k): float(v) for k, v in card["thresholds"].items()}
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise DecomposerArtifactError(f"{path} is unreadable ({exc}); rebuild it with `amsrag train decomposer "
                                          "calibrate`") from exc
        if len(weights) != len(FEATURES):
            raise DecomposerArtifactError(f"{path} has {len(weights)} weights for {len(FEATURES)} features; rebuild "
                                          "it with `amsrag train decomposer calibrate`")
        return cls(weights, thresholds, card)

    def probability(self, features: list[float]) -> float:
        z = sum(w * x for w, x in zip(self.weights, features, strict=True))
        return 1.0 / (1.0 + math.exp(-max(-40.0, min(40.0, z))))
