"""What the engine hands on for each passage it retrieved (a leaf of the pipeline: the trace and the passes
both name it)."""

from __future__ import annotations

from dataclasses import dataclass, field

from amsrag.types import Passage


@dataclass(frozen=True, slots=True)
class ScoredPassage:
    """A passage the engine hands on, with its fused score and store row (-1: from an external source).
    `stored`: the stored passage it was read from (its document and metadata) when the engine read one; the
    adapters hand on its metadata without reading the store again. Not part of equality."""

    id: str
    title: str
    text: str
    score: float
    row: int
    stored: Passage | None = field(default=None, compare=False, repr=False)
