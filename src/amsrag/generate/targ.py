"""The zero-hop / TARG gate: a generator with its own knowledge answers closed book, and retrieval is
skipped only when that answer's confidence (from token logprobs) reaches a threshold calibrated on
labelled questions."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from amsrag.errors import InputError
from amsrag.generate.base import Generation, Generator


@dataclass(frozen=True, slots=True)
class GateCalibration:
    threshold: float  # 1.0 (or above every confidence) = the gate never fires
    fire_rate: float  # share of the calibration questions it would skip retrieval for
    precision: float  # share of those whose closed-book answer was right (nan when it never fires)
    n: int
    n_positive: int
    target_precision: float


class TargGate:
    """`decide(question) -> (skip, confidence, generation)`: skip retrieval iff the closed-book answer
    is not an abstention and its confidence >= threshold. Generators without own knowledge or without
    logprobs never skip."""

    def __init__(self, generator: Generator, threshold: float) -> None:
        if not 0.0 <= threshold <= 1.0:
            raise InputError(f"TARG threshold must lie in [0, 1], got {threshold}")
        self.generator = generator
        self.threshold = threshold

    @property
    def active(self) -> bool:
        return bool(self.generator.knows and self.generator.logprobs and self.threshold < 1.0)

    def decide(self, question: str) -> tuple[bool, float | None, Generation | None]:
        if not self.active:
            return False, None, None
        g = self.generator.closed_book(question)
        confidence = g.confidence
        skip = confidence is not None and not g.abstained and confidence >= self.threshold
        return skip, confidence, g


def calibrate_threshold(confidences: Sequence[float | None], correct: Sequence[bool], target_precision: float = 0.8,
                        min_fired: int = 10) -> GateCalibration:
    """The lowest threshold whose fired set (confidence >= t) is right at least `target_precision` of the
    time and holds at least `min_fired` questions; 1.0 (never fire) when no threshold qualifies.

    `correct[i]`: question i is answerable without retrieval (its closed-book answer matched the gold
    answer, or a silver zero_hop label). Missing confidences count as never firing.
    """
    if len(confidences) != len(correct):
        raise InputError(f"{len(confidences)} confidences but {len(correct)} labels")
    conf = np.array([-1.0 if c is None else float(c) for c in confidences])
    ok = np.asarray(correct, dtype=bool)
    n = len(conf)
    best = 1.0
    for t in sorted(set(conf[conf >= 0].tolist())):
        fired = conf >= t
        if fired.sum() >= min_fired and ok[fired].mean() >= target_precision:
            best = t
            break
    fired = conf >= best if best < 1.0 else np.zeros(n, dtype=bool)
    precision = float(ok[fired].mean()) if fired.any() else float("nan")
    return GateCalibration(float(best), float(fired.mean()) if n else 0.0, precision, n, int(ok.sum()),
                           target_precision)


def gate_stats(confidences: Sequence[float | None], correct: Sequence[bool], threshold: float) -> dict[str, float]:
    """How often a gate at `threshold` fires and how often it is right when it does."""
    conf = np.array([-1.0 if c is None else float(c) for c in confidences])
    ok = np.asarray(correct, dtype=bool)
    fired = (conf >= threshold) & (conf >= 0) if threshold < 1.0 else np.zeros(len(conf), dtype=bool)
    return {"n": len(conf), "fire_rate": float(fired.mean()) if len(conf) else 0.0, "fired": int(fired.sum()),
            "accuracy_when_fired": float(ok[fired].mean()) if fired.any() else float("nan"),
            "base_rate": float(ok.mean()) if len(ok) else float("nan")}
