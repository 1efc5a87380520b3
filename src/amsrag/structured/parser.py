"""The offline semantic parser: candidate SQL programs for a question over one table, ranked by a trained model.

`SemanticParser.answer` enumerates programs (`structured.programs`), runs each through the runner (a
program that fails or returns nothing is skipped), scores the executed ones with the shipped ranker over
`structured.features` and returns the best with its SQL, the rows it came from and a calibrated confidence.

The artifact (`src/amsrag/data/tables/`, written by `python -m amsrag.learn.tables.train`): the card
`parser.json` (features, settings, data, metrics, the model file's sha256 and the confidence calibration)
and the model, `parser.txt` (LightGBM) or `parser.npz` (a logistic regression's weights).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from amsrag.artifacts import file_sha256
from amsrag.embed.encoder import Encoder
from amsrag.errors import InputError
from amsrag.structured.features import FEATURES, FEATURES_VERSION, Executed, execute, featurize, question_context
from amsrag.structured.programs import Mentions, Program, candidate_programs
from amsrag.tables.base import SqlRunner, StructuredAnswer
from amsrag.tables.table import TableProfile

CARD_FILE = "parser.json"
LIGHTGBM_FILE = "parser.txt"
LOGISTIC_FILE = "parser.npz"
CARD_VERSION = 1
TRAIN_COMMAND = "python -m amsrag.learn.tables.train --data ../shared/data --out src/amsrag/data/tables"
MAX_ROW_IDS = 50


def default_directory() -> Path:
    return Path(str(resources.files("amsrag") / "data" / "tables"))


def column_cosines(question_vector: np.ndarray, column_vectors: np.ndarray) -> np.ndarray:
    if len(column_vectors) == 0:
        return np.zeros(0)
    return np.asarray(column_vectors, dtype=np.float64) @ np.asarray(question_vector, dtype=np.float64)


def column_texts(profile: TableProfile) -> list[str]:
    """What is embedded per column: its header name (with the unit when the header has none)."""
    return [f"{c.name} ({c.unit})" if c.unit and c.unit not in c.name else c.name for c in profile.columns]


@dataclass(frozen=True, slots=True)
class Candidates:
    """A question's executed candidates and their features (what the ranker scores)."""

    mentions: Mentions
    executed: list[Executed]
    x: np.ndarray
    enumerated: int


def build_candidates(question: str, profile: TableProfile, runner: SqlRunner, question_vector: np.ndarray,
                     column_vectors: np.ndarray) -> Candidates:
    mentions, programs = candidate_programs(question, profile, runner)
    executed = [e for e in (execute(p, runner) for p in programs) if e is not None]
    context = question_context(question, mentions)
    x = featurize(context, mentions, profile, executed, column_cosines(question_vector, column_vectors))
    return Candidates(mentions, executed, x, len(programs))


class Ranker:
    """Scores candidates: a LightGBM booster or a standardised logistic regression."""

    def __init__(self, kind: str, booster: Any = None, weights: np.ndarray | None = None,
                 mean: np.ndarray | None = None, scale: np.ndarray | None = None, bias: float = 0.0) -> None:
        self.kind = kind
        self.booster = booster
        self.weights, self.mean, self.scale, self.bias = weights, mean, scale, bias

    def score(self, x: np.ndarray) -> np.ndarray:
        if len(x) == 0:
            return np.zeros(0)
        if self.kind == "lightgbm":
            return np.asarray(self.booster.predict(x, num_threads=1), dtype=np.float64)
        assert self.weights is not None and self.mean is not None and self.scale is not None
        return ((x - self.mean) / self.scale) @ self.weights + self.bias


def confidence_of(scores: np.ndarray, calibration: dict[str, float]) -> float:
    """Platt scaling of the top score and its margin over the runner-up (fitted on the calibration tables)."""
    if len(scores) == 0:
        return 0.0
    top = np.sort(scores)[::-1]
    margin = float(top[0] - top[1]) if len(top) > 1 else float(calibration.get("single_margin", 1.0))
    z = calibration["a_score"] * float(top[0]) + calibration["a_margin"] * margin + calibration["b"]
    return float(1.0 / (1.0 + math.exp(-max(min(z, 50.0), -50.0))))


def best_index(scores: np.ndarray) -> int:
    """The highest score; ties go to the earlier (more specific) candidate, so the choice is deterministic."""
    return int(np.argmax(scores)) if len(scores) else -1


class SemanticParser:
    def __init__(self, ranker: Ranker, card: dict[str, Any], directory: Path) -> None:
        self.ranker = ranker
        self.card = card
        self.directory = directory
        self.calibration: dict[str, float] = {k: float(v) for k, v in card["calibration"]["platt"].items()}

    @classmethod
    def load(cls, directory: Path | None = None) -> SemanticParser:
        """The artifact in `directory` (None: the shipped one); InputError naming the file when one is missing,
        corrupt or made for other features."""
        directory = Path(directory) if directory is not None else default_directory()
        card_path = directory / CARD_FILE
        if not card_path.is_file():
            raise InputError(f"{card_path}: no semantic parser artifact here (needs {CARD_FILE}); "
                             f"train one with `{TRAIN_COMMAND}`")
        try:
            card = json.loads(card_path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise InputError(f"{card_path}: not valid JSON ({exc}); the artifact is corrupt") from None
        if not isinstance(card, dict) or card.get("card_version") != CARD_VERSION:
            raise InputError(f"{card_path}: not a version {CARD_VERSION} semantic parser card; retrain with "
                             f"`{TRAIN_COMMAND}`")
        features = card.get("features", {})
        if not isinstance(features, dict) or features.get("version") != FEATURES_VERSION \
                or features.get("names") != list(FEATURES):
            raise InputError(f"{card_path}: trained on other features than this amsrag computes "
                             f"(version {FEATURES_VERSION}); retrain with `{TRAIN_COMMAND}`")
        kind = card.get("model")
        model_path = directory / (LIGHTGBM_FILE if kind == "lightgbm" else LOGISTIC_FILE)
        if kind not in ("lightgbm", "logistic"):
            raise InputError(f"{card_path}: unknown model {kind!r}; the artifact is corrupt")
        if not model_path.is_file():
            raise InputError(f"{model_path}: missing; the semantic parser artifact is incomplete "
                             f"(retrain with `{TRAIN_COMMAND}`)")
        if file_sha256(model_path) != card.get("model_sha256"):
            raise InputError(f"{model_path}: sha256 differs from the card's model_sha256 in {card_path}; "
                             "the artifact is corrupt")
        if "calibration" not in card or "platt" not in card["calibration"]:
            raise InputError(f"{card_path}: no confidence calibration; the artifact is corrupt")
        try:
            if kind == "lightgbm":
                from amsrag.lazy import import_lightgbm

                lgb = import_lightgbm()
                ranker = Ranker(kind, booster=lgb.Booster(model_str=model_path.read_text(encoding="utf-8")))
            else:
                with np.load(model_path, allow_pickle=False) as npz:
                    ranker = Ranker(kind, weights=npz["weights"], mean=npz["mean"], scale=npz["scale"],
                                    bias=float(npz["bias"]))
        except Exception as exc:  # lightgbm / numpy raise their own error types for a damaged file
            raise InputError(f"{model_path}: not a readable model ({exc}); the artifact is corrupt") from None
        return cls(ranker, card, directory)

    def rank(self, candidates: Candidates) -> np.ndarray:
        return self.ranker.score(candidates.x)

    def answer(self, question: str, profile: TableProfile, runner: SqlRunner, encoder: Encoder) -> StructuredAnswer:
        vectors = encoder.encode([question, *column_texts(profile)])
        candidates = build_candidates(question, profile, runner, vectors[0], vectors[1:])
        return self.choose(question, profile, runner, candidates)

    def choose(self, question: str, profile: TableProfile, runner: SqlRunner,
               candidates: Candidates) -> StructuredAnswer:
        if not candidates.executed:
            return StructuredAnswer(profile.table_id, (), "", (), 0.0, "", 0,
                                    {"reason": "no candidate program returned an answer",
                                     "enumerated": candidates.enumerated})
        scores = self.rank(candidates)
        best = best_index(scores)
        chosen = candidates.executed[best]
        return StructuredAnswer(profile.table_id, chosen.answer, chosen.program.sql,
                                self.row_ids(chosen, runner), confidence_of(scores, self.calibration),
                                chosen.program.kind, len(candidates.executed),
                                {"description": chosen.program.describe(), "score": float(scores[best]),
                                 "enumerated": candidates.enumerated})

    @staticmethod
    def row_ids(chosen: Executed, runner: SqlRunner) -> tuple[int, ...]:
        program: Program = chosen.program
        if program.returns_rows:
            return chosen.row_ids[:MAX_ROW_IDS]
        if not program.rows_sql:
            return ()
        try:
            rows = runner.run(program.rows_sql).rows
        except Exception:  # the answer stands without its citations
            return ()
        return tuple(int(r[0]) for r in rows[:MAX_ROW_IDS] if r and isinstance(r[0], int))


def top_programs(parser: SemanticParser, candidates: Candidates, k: int = 5) -> Sequence[tuple[float, Executed]]:
    """The k best candidates with their scores (inspection and the benchmark's error analysis)."""
    scores = parser.rank(candidates)
    order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))[:k]
    return [(float(scores[i]), candidates.executed[i]) for i in order]
