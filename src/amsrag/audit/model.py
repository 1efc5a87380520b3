"""The support classifier of the audit and its artifact (`src/amsrag/data/audit/`: audit.json + audit.npz).

Two calibrated models over the features of `audit.features`: `full` (reader + text features) and `text`
(text features only, for an answer the reader cannot read, such as a Chinese one). Each is a logistic
regression or a gradient-boosted tree ensemble, calibrated on the calibration split; the flag threshold
of each was chosen on that split too (`amsrag train audit train`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from amsrag.artifacts import SHA256_KEY, ArtifactFormat, check_features, load_artifact, save_artifact
from amsrag.audit.features import FEATURE_NAMES, FEATURE_VERSION, N_TEXT
from amsrag.correct.evaluator import RelevanceModel, ScoreCalibrator, TreeEnsemble
from amsrag.errors import InputError

ARTIFACT_VERSION = 1
FORMAT = ArtifactFormat(kind="audit", article="an", card="audit.json", arrays="audit.npz", version=ARTIFACT_VERSION,
                        readable=(ARTIFACT_VERSION,), train_command="amsrag train audit train")
MODEL_KINDS: dict[str, type[RelevanceModel] | type[TreeEnsemble]] = {"logistic": RelevanceModel,
                                                                     "gbdt": TreeEnsemble}
HEADS = ("full", "text")


def shipped_artifact_dir() -> Path:
    return Path(str(resources.files("amsrag") / "data" / "audit"))


@dataclass(frozen=True, slots=True)
class SupportHead:
    """One calibrated model: P(supported | features) and the threshold below which an answer is flagged."""

    model: RelevanceModel | TreeEnsemble
    calibrator: ScoreCalibrator
    threshold: float

    def support(self, x: np.ndarray) -> np.ndarray:
        return np.clip(self.calibrator(self.model.logits(np.atleast_2d(x))), 0.0, 1.0)


def columns(head: str) -> slice:
    """The feature columns a head reads: every one (`full`) or the text features (`text`)."""
    return slice(0, len(FEATURE_NAMES)) if head == "full" else slice(len(FEATURE_NAMES) - N_TEXT, None)


@dataclass(slots=True)
class SupportModel:
    heads: dict[str, SupportHead]
    meta: dict[str, Any] = field(default_factory=dict)

    def score(self, x: np.ndarray, head: str) -> np.ndarray:
        """P(supported) of feature rows (all of `FEATURE_NAMES`) by `head`."""
        return self.heads[head].support(np.atleast_2d(x)[:, columns(head)])

    def save(self, directory: Path | str) -> Path:
        arrays: dict[str, np.ndarray] = {}
        spec: dict[str, Any] = {}
        for name, h in self.heads.items():
            arrays.update({f"{name}_model_{k}": v for k, v in h.model.arrays().items()})
            arrays.update({f"{name}_cal_{k}": v for k, v in h.calibrator.params.items()})
            spec[name] = {"model": {"kind": h.model.kind, "arrays": sorted(h.model.arrays())},
                          "calibration": {"method": h.calibrator.method, "params": sorted(h.calibrator.params)},
                          "threshold": h.threshold}
        card = {**self.meta, "artifact_version": ARTIFACT_VERSION,
                "features": {"version": FEATURE_VERSION, "names": list(FEATURE_NAMES)}, "heads": spec}
        return save_artifact(directory, FORMAT, arrays, card)

    @classmethod
    def load(cls, path: Path | str | None = None,
             feature_spec: tuple[int, Sequence[str]] | None = None) -> SupportModel:
        """An artifact directory (None or "": the one shipped in the package), its sha256 checked.
        `feature_spec` (version, names): accept an artifact of that spec instead of this amsrag's (a
        benchmark comparing against an older artifact, scoring the columns it names)."""
        artifact = load_artifact(Path(path) if path else shipped_artifact_dir(), FORMAT)
        version, names = feature_spec or (FEATURE_VERSION, FEATURE_NAMES)
        check_features(artifact, FORMAT, version, names)
        heads: dict[str, SupportHead] = {}
        for name in HEADS:
            spec = artifact.card.get("heads", {}).get(name)
            if not isinstance(spec, dict):
                raise InputError(f"{artifact.card_path}: no `{name}` head; the artifact is corrupt")
            kind = spec["model"]["kind"]
            model_type = MODEL_KINDS.get(kind)
            if model_type is None:
                raise InputError(f"{artifact.card_path}: unknown model kind {kind!r}")
            model = model_type.from_arrays({k: artifact.array(f"{name}_model_{k}") for k in spec["model"]["arrays"]})
            cal = ScoreCalibrator(spec["calibration"]["method"],
                                  {k: artifact.array(f"{name}_cal_{k}") for k in spec["calibration"]["params"]})
            heads[name] = SupportHead(model, cal, float(spec["threshold"]))
        meta = {k: v for k, v in artifact.card.items() if k not in ("heads", SHA256_KEY)}
        return cls(heads, meta)
