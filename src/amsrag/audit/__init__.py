"""The citation-support audit (issue 22 item 1): after generation, does the cited text support the answer?

It runs between the generator and the trace of DESIGN §2's flow (`Generator -> Audit -> Trace`) on every
answer `Engine.ask` returns, the extractive reader's and an LLM's alike: a calibrated probability that the
cited passages support the answer (`support`), and a flag when it is below the threshold chosen on the
calibration split. It is its own stage rather than part of `correct/`: the corrective step judges the
evidence before an answer exists, the audit judges an answer against the evidence it cites.
`audit.signals` then reads the whole trace (route, corrective step, audit, generator confidence) into the
five proxy signals of the answer (`trace["signals"]`), which the monitoring (`amsrag.monitor`) aggregates.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from amsrag.audit.features import FEATURE_NAMES, READER_FEATURES, AuditFeatures, Source, audit_features
from amsrag.audit.model import SupportModel
from amsrag.correct.evaluator import passage_field

if TYPE_CHECKING:
    from amsrag.config import AuditConfig
    from amsrag.generate.reader_model import SpanReader

__all__ = ["FEATURE_NAMES", "AuditFeatures", "SupportAuditor", "SupportModel", "SupportVerdict", "audit_features"]


@dataclass(frozen=True, slots=True)
class SupportVerdict:
    """The audit of one answer: P(the cited text supports it), and whether it is flagged (support below
    `threshold`). `head`: the model that scored (`full` with the reader's features, `text` without);
    `against`: the answer's citations, or the whole evidence when it cited none."""

    support: float
    flagged: bool
    threshold: float
    head: Literal["full", "text"]
    source: Source
    cited: tuple[str, ...]
    against: Literal["citations", "evidence"]
    located_in: str | None = None  # the passage where the reader reads the answer best
    features: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"support": round(self.support, 4), "flagged": self.flagged, "threshold": self.threshold,
                "verdict": "unsupported" if self.flagged else "supported", "model": self.head,
                "features_from": self.source, "cited": list(self.cited), "against": self.against,
                "located_in": self.located_in, "features": dict(self.features)}


class SupportAuditor:
    """Scores answers against their cited passages. `reader`: the span reader whose features it reads (the
    engine hands over its own; else loaded on first use); `use_reader` False: the text-only model always."""

    def __init__(self, model: SupportModel | None = None, reader: SpanReader | None = None,
                 threshold: float | None = None, use_reader: bool = True) -> None:
        self.model = model if model is not None else SupportModel.load()
        self._reader = reader
        self.threshold = threshold
        self.use_reader = use_reader
        self._lock = threading.Lock()

    @classmethod
    def from_config(cls, config: AuditConfig, reader: SpanReader | None = None) -> SupportAuditor:
        return cls(SupportModel.load(config.artifact or None), reader, config.threshold, config.reader)

    @property
    def reader(self) -> SpanReader:
        with self._lock:
            if self._reader is None:
                from amsrag.generate.reader_model import SpanReader

                self._reader = SpanReader.load()
            return self._reader

    def audit(self, question: str, answer: str, passages: Sequence[Any], multi_hop: bool,
              against: Literal["citations", "evidence"] = "citations", readable: bool = True) -> SupportVerdict:
        """The verdict on `answer` against `passages` (what it cites). `readable` False (a Chinese answer:
        the English reader cannot read it): the text-only model."""
        t = time.perf_counter()
        support = None
        top = 0.0
        if self.use_reader and readable:
            reading = self.reader.answer_support(question, passages, [answer])
            support, top = reading.answers[0], reading.top_prob
        feats = audit_features(question, answer, passages, multi_hop, support, top)
        head: Literal["full", "text"] = "full" if support is not None else "text"
        p = float(self.model.score(feats.values, head)[0])
        threshold = self.threshold if self.threshold is not None else self.model.heads[head].threshold
        named = feats.named()
        if head == "text":
            named = {k: v for k, v in named.items() if k not in READER_FEATURES}
        named["ms"] = round((time.perf_counter() - t) * 1000, 3)
        return SupportVerdict(p, p < threshold, threshold, head, feats.source,
                              tuple(passage_field(x, "id") for x in passages), against,
                              support.passage_id if support is not None else None, named)
