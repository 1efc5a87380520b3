"""Reading the evidence of a first pass inside `Engine.answer`: the generator's calls, timed, with the extractive
fallback; the reader's gate before the corrective step; and the closed-book answer when the TARG gate fires."""

from __future__ import annotations

import time

import numpy as np

from amsrag.config import AmsragConfig
from amsrag.embed.encoder import Encoder
from amsrag.generate import (
    AbstainsBelow,
    CalibratedReader,
    Generation,
    Generator,
    GeneratorError,
    generate_answer,
    make_generator,
)
from amsrag.pipeline.context import ms_since
from amsrag.pipeline.corrective import CorrectiveLoop
from amsrag.pipeline.first_pass import FirstPass
from amsrag.pipeline.results import Answered, AnswerResult, RetrievalResult, reading_evidence
from amsrag.pipeline.trace import AuditTrace, ComplexityTrace, ReaderCheck, TargTrace, Trace
from amsrag.pipeline.trace_parts import GeneratorTrace


class Reading:
    """One question's generator calls: timed, with the extractive fallback when the generator fails. `knows`: the
    generator answers from its own knowledge (a confident zero_hop is answered closed-book)."""

    def __init__(self, config: AmsragConfig, encoder: Encoder, generator: Generator, query: str,
                 vector: np.ndarray, knows: bool) -> None:
        self.config, self.encoder = config, encoder
        self.generator, self.query, self.vector, self.knows = generator, query, vector, knows
        self.strips = config.generator.read_strips
        self.ms = 0.0
        self.error: str | None = None

    def evidence_ids(self, result: RetrievalResult) -> list[tuple[str, str]]:
        return [(p.id, p.text) for p in reading_evidence(result, self.strips)]

    def read(self, result: RetrievalResult) -> Generation:
        t = time.perf_counter()
        try:
            if not result.passages and self.knows and result.trace.strategy == "none":
                g = self.generator.closed_book(self.query)  # a confident zero_hop: the model's own knowledge
            else:
                g = generate_answer(self.generator, self.query, reading_evidence(result, self.strips), self.vector)
        except GeneratorError as exc:
            self.error = str(exc)
            fallback = make_generator(self.config.generator, self.encoder, name="extractive")
            g = generate_answer(fallback, self.query, reading_evidence(result, self.strips), self.vector)
        self.ms += ms_since(t)
        return g

    def done(self, result: RetrievalResult, g: Generation) -> Answered:
        return Answered(result, g, self.ms, self.generator.name, self.error)

    def answer(self, first: FirstPass, corrective: CorrectiveLoop) -> Answered:
        """The answer over `first`'s evidence after the corrective step. A reader with calibrated confidence reads
        the first pass before the step and skips it when confident (`corrective.reader_gate`); below the gate it
        widens the route once (`corrective.below_gate = "escalate"`) or lets the step run."""
        cfg = self.config.corrective
        if not (first.context.spec.corrective and cfg.enabled):
            result = first.result()
            return self.done(result, self.read(result))
        generator = self.generator
        if not (isinstance(generator, CalibratedReader) and generator.calibrated_confidence and cfg.reader_gate < 1):
            checked = first.checked(corrective)
            return self.done(checked, self.read(checked))
        early = first.result()
        g = self.read(early)
        conf = g.confidence if g.confidence is not None else 0.0
        conf = float(g.details.get("span_confidence", conf))  # a sentence answer: the gate reads the span's
        if conf >= cfg.reader_gate:
            return self.done(first.result(reader=ReaderCheck("accepted", conf, cfg.reader_gate)), g)
        if cfg.below_gate == "escalate":
            widened = first.widened(corrective, ReaderCheck("escalated", conf, cfg.reader_gate))
            if widened is None:  # already the widest route: the first read stands
                return self.done(first.result(reader=ReaderCheck("kept", conf, cfg.reader_gate)), g)
            return self.done(widened, self.read(widened))
        checked = first.checked(corrective)
        if self.evidence_ids(checked) == self.evidence_ids(early):
            return self.done(checked, g)  # the step kept the evidence: the first read stands
        return self.done(checked, self.read(checked))


def reader_for_route(generator: Generator, complexity: ComplexityTrace | None, lowered: float | None) -> Generator:
    """`generator` with the multi-hop abstention threshold `lowered` (`generator.multi_hop_threshold`) when the
    question is routed multi-hop."""
    if (lowered is None or complexity is None or complexity.routed[0] != "multi_hop"
            or not isinstance(generator, AbstainsBelow) or lowered >= generator.threshold):
        return generator
    return generator.at_threshold(lowered)


def closed_book_answer(query: str, system: str, g: Generation, targ: TargTrace, t0: float) -> AnswerResult:
    """The TARG gate fired: the closed-book answer stands, no retrieval ran (the proxy signals not yet read)."""
    audit = AuditTrace(reason="abstained" if g.abstained else "no evidence: a closed-book answer")
    trace = Trace(system=system, complexity=None, strategy="none",
                  reason=f"TARG: closed-book confidence {targ.confidence or 0.0:.3f} >= {targ.threshold}",
                  generator=GeneratorTrace.of(g), targ=targ, audit=audit,
                  timings={"embed": 0.0, "retrieve": {}, "fusion": 0.0, "mmr": 0.0, "targ": targ.ms,
                           "total": ms_since(t0)})
    return AnswerResult(query, g.answer, [], g.abstained, trace)
