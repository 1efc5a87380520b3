"""`SpanReaderGenerator`: the span reader behind the `Generator` Protocol (the `extractive` generator), with a
cache of recent readings and one view per abstention threshold."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from amsrag.config import GeneratorConfig
from amsrag.generate.base import ABSTAIN, EvidencePassage, Generation, Quote
from amsrag.generate.reader_model import SpanReader


class SpanReaderGenerator:
    """The span reader behind amsrag's `Generator` Protocol, the `extractive` default (open book only: it
    knows nothing itself). Passages that carry a `score` (the engine's `ScoredPassage`) hand it on as the
    retrieval feature."""

    name = "extractive"
    knows = False
    logprobs = False
    streaming = False
    calibrated_confidence = True

    def __init__(self, reader: SpanReader | None = None, directory: Path | str | None = None, threads: int = 1,
                 threshold: float | None = None, cache_size: int = 256) -> None:
        self.reader = reader if reader is not None else SpanReader.load(directory, threads)
        self.threshold = self.reader.threshold if threshold is None else float(threshold)
        # the same question over the same evidence comes back (the eval's threshold rows, a retried request)
        self._cache: OrderedDict[tuple[Any, ...], Generation] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()
        self._views: dict[float, SpanReaderGenerator] = {}

    def at_threshold(self, threshold: float) -> SpanReaderGenerator:
        """The same reader abstaining below `threshold` instead (one view per threshold, with its own cache)."""
        threshold = float(threshold)
        if threshold == self.threshold:
            return self
        with self._lock:
            view = self._views.get(threshold)
            if view is None:
                view = self._views[threshold] = SpanReaderGenerator(self.reader, threshold=threshold,
                                                                    cache_size=self._cache_size)
        return view

    @classmethod
    def from_config(cls, config: GeneratorConfig) -> SpanReaderGenerator:
        return cls(directory=config.reader or None, threads=config.reader_threads, threshold=config.reader_threshold)

    def generate(self, question: str, passages: Sequence[EvidencePassage],
                 retrieval_scores: Sequence[float] | None = None) -> Generation:
        if retrieval_scores is None and passages and all(isinstance(getattr(p, "score", None), float | int)
                                                         for p in passages):
            retrieval_scores = [float(p.score) for p in passages]  # type: ignore[attr-defined]
        question = self.reader.bounded(question)  # what the reader reads, and a bounded cache key
        key = (question, tuple((p.id, p.title, p.text) for p in passages),
               tuple(retrieval_scores) if retrieval_scores is not None else None)
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
                return hit
        g = self._generate(question, passages, retrieval_scores)
        with self._lock:
            self._cache[key] = g
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return g

    def _generate(self, question: str, passages: Sequence[EvidencePassage],
                  retrieval_scores: Sequence[float] | None) -> Generation:
        r = self.reader.read(question, passages, retrieval_scores)
        # the generator's threshold, not the reader's (`r.abstained`): a view may read with a lower one
        abstained = r.answer == ABSTAIN or r.confidence < self.threshold
        details: dict[str, Any] = {"answer_type": r.kind, "candidate": r.answer, "candidate_passage": r.passage_id,
                                   "alternatives": [a.answer for a in r.alternatives],
                                   "threshold": self.threshold, "windows": int(r.features.get("windows", 0))}
        if abstained:
            q, qconf, qt = r.quote, r.quote_confidence, self.reader.quote_threshold
            if q is not None and qconf is not None and qt is not None and qconf >= qt:
                # the span is unsure but its sentence very likely holds the answer: answer with the sentence
                details.update({"answer_type": "sentence", "span_confidence": round(r.confidence, 4),
                                "quote_threshold": qt})
                whole = Quote(q.text, 0, len(q.text), q.passage_id)
                return Generation(q.text, (q.passage_id,), round(qconf, 4), False, ms=r.ms, generator=self.name,
                                  details=details, quote=whole)
            return Generation(ABSTAIN, (), round(r.confidence, 4), True, ms=r.ms, generator=self.name,
                              details=details)
        cites = (r.passage_id,) if r.passage_id else ()
        return Generation(r.answer, cites, round(r.confidence, 4), False, ms=r.ms, generator=self.name,
                          details=details, quote=r.quote)

    def closed_book(self, question: str) -> Generation:
        return Generation(ABSTAIN, (), 0.0, True, generator=self.name, details={"reason": "no evidence"})
