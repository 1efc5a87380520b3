"""The citation-support audit of an answer inside the engine (`amsrag.audit`): which passages it is audited
against, and when no audit runs (an abstention, a closed-book answer, the table or global route, the audit off)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

from amsrag.config import AmsragConfig
from amsrag.errors import InputError
from amsrag.generate import Generation, Generator
from amsrag.generate.span_reader import SpanReaderGenerator
from amsrag.pipeline.context import ms_since
from amsrag.pipeline.results import Answered, reading_evidence
from amsrag.pipeline.trace import AuditTrace
from amsrag.text.language import is_chinese

if TYPE_CHECKING:
    from amsrag.audit import SupportAuditor


class AnswerAudit:
    """The audit for one engine; the auditor's models load on first use (one per engine)."""

    def __init__(self, config: AmsragConfig) -> None:
        self.config = config
        self._auditor: SupportAuditor | None = None

    def auditor(self, generator: Generator | None = None) -> SupportAuditor:
        """The citation-support auditor, built once; it reads with the engine's span reader when the
        generator is the extractive one (one reader model per engine)."""
        if self._auditor is None:
            from amsrag.audit import SupportAuditor

            reader = generator.reader if isinstance(generator, SpanReaderGenerator) else None
            self._auditor = SupportAuditor.from_config(self.config.audit, reader)
        return self._auditor

    def audit(self, answered: Answered, generator: Generator) -> AuditTrace:
        """The audit of an outcome of `Engine.answer` against the evidence its generator read. No audit for an answer
        of the table or global route."""
        g, result = answered.generation, answered.retrieval
        if result.trace.strategy in ("table", "global") and self.config.audit.enabled and not g.abstained:
            return AuditTrace(reason=f"the {result.trace.strategy} route's answer is not audited")
        complexity = result.trace.complexity
        multi_hop = complexity.routed[0] == "multi_hop" if complexity is not None else None
        return self.audit_answer(result.query, g, reading_evidence(result, self.config.generator.read_strips),
                                 multi_hop, generator)

    def audit_answer(self, query: str, g: Generation, evidence: Sequence[Any], multi_hop: bool | None,
                     generator: Generator) -> AuditTrace:
        """The audit of `g` (the answer to `query`) against the passages of `evidence` it cites (all of
        `evidence` when it cites none); `multi_hop`: the question was routed as multi-hop (None: unknown,
        two or more audited passages say so). No audit for an abstention or an answer without evidence."""
        if not self.config.audit.enabled:
            return AuditTrace(reason="audit disabled ([audit] enabled = false)")
        if g.abstained:
            return AuditTrace(reason="abstained")
        t = time.perf_counter()
        by_id = {p.id: p for p in evidence}
        cited = [by_id[c] for c in g.citations if c in by_id]
        against: Literal["citations", "evidence"] = "citations" if cited else "evidence"
        passages = cited or list(evidence)
        if not passages or not g.answer.strip():
            return AuditTrace(reason="no evidence: a closed-book answer")
        if multi_hop is None:
            multi_hop = len(passages) >= 2
        readable = not is_chinese(f"{query} {g.answer}")
        try:
            auditor = self.auditor(generator)
        except InputError as exc:  # a missing or corrupt audit artifact must not cost the answer
            return AuditTrace(reason=f"audit unavailable: {exc}", ms=ms_since(t))
        verdict = auditor.audit(query, g.answer, passages, multi_hop, against, readable)
        reason = "" if readable else "Chinese: the text-only model (the span reader reads English)"
        return AuditTrace(verdict, reason, ms_since(t))
