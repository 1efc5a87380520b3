"""The TRACE of DESIGN §9 as typed records: what the engine decided, each score and each timing.

Every stage hands the engine a typed result; the engine assembles them into one `Trace`. The JSON
contract (`--json`, the HTTP API, the web UI) is `Trace.to_dict()`, and a `Trace` reads as that
mapping too (`trace["strategy"]`), so callers that speak the contract need not know the records.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal

from amsrag.fuse import FusedList, MMRResult
from amsrag.pipeline.trace_parts import GeneratorTrace, GlobalRouteTrace, TableRouteTrace

if TYPE_CHECKING:
    from amsrag.audit import SupportVerdict
    from amsrag.audit.signals import ProxySignals
    from amsrag.classify.library import LibraryVote
    from amsrag.correct.actions import Correction
    from amsrag.correct.sufficiency import Sufficiency
    from amsrag.pipeline.chain import ChainTrace
    from amsrag.pipeline.execute import RetrieverRun
    from amsrag.pipeline.language import LanguageTrace
    from amsrag.pipeline.multihop import Expansion
    from amsrag.route.taxonomy import TaxonomyDecision

TRACE_HITS = 20  # hits per retriever (and fused items) kept in the trace

Timings = dict[str, Any]  # stage -> ms, or {retriever: ms} for the retrieval stages; insertion order is run order


@dataclass(frozen=True, slots=True)
class ComplexityTrace:
    """The classifier's prediction, and the class and confidence retrieval was configured by when they differ."""

    label: str
    probs: dict[str, float]
    alpha: float
    route_label: str | None = None
    route_alpha: float | None = None
    library: LibraryVote | None = None  # the query library's vote (close labelled neighbours), if any
    decided_by: str = "classifier"  # "library" when the vote changed the classifier's label
    embedding: bool = True  # False: the routing encoder cannot read the question (Chinese); features decided

    @property
    def routed(self) -> tuple[str, float]:
        """(class, confidence) that routing and CA-RRF act on."""
        return (self.route_label if self.route_label is not None else self.label,
                self.route_alpha if self.route_alpha is not None else self.alpha)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"label": self.label, "probs": dict(self.probs), "alpha": self.alpha}
        out["route_label"], out["route_alpha"] = self.routed
        out["decided_by"] = self.decided_by
        if not self.embedding:
            out["embedding"] = False
        if self.library is not None:
            out["library"] = self.library.to_dict()
        return out


@dataclass(frozen=True, slots=True)
class AdaptiveKTrace:
    k: int
    drop: float
    min: int
    max: int

    def to_dict(self) -> dict[str, Any]:
        return {"k": self.k, "drop": self.drop, "min": self.min, "max": self.max}


@dataclass(frozen=True, slots=True)
class ReaderCheck:
    """The reader's check of the first pass: its confidence against the gate, and what followed."""

    decision: Literal["accepted", "escalated", "kept"]  # kept: below the gate, but no wider route exists
    confidence: float
    gate: float

    @property
    def reason(self) -> str:
        if self.decision == "accepted":
            return f"confidence {self.confidence:.3f} >= {self.gate}"
        tail = ", no wider route" if self.decision == "kept" else ""
        return f"confidence {self.confidence:.3f} < {self.gate}{tail}"

    def to_dict(self) -> dict[str, Any]:
        return {"assessed_by": "reader", "confidence": round(self.confidence, 4), "gate": self.gate,
                "reason": self.reason}


@dataclass(frozen=True, slots=True)
class CorrectiveTrace:
    """The corrective step on one query: the assessment and action (None: skipped), the external
    sources' outcome, whether nothing was left, and the sufficiency check."""

    correction: Correction | None = None
    external: dict[str, Any] | None = None
    insufficient_evidence: bool = False
    sufficiency: Sufficiency | None = None
    reader: ReaderCheck | None = None  # the reader assessed the evidence instead of the evaluator

    @property
    def action(self) -> str:
        if self.reader is not None:
            return f"reader-{self.reader.decision}"
        return "skipped" if self.correction is None else self.correction.assessment.action

    def to_dict(self) -> dict[str, Any]:
        if self.correction is None:
            out: dict[str, Any] = {"score": None, "action": self.action}
            if self.reader is not None:
                out.update(self.reader.to_dict())
            return out
        out = self.correction.to_dict()
        if self.external is not None:
            out["external"] = self.external
        if self.insufficient_evidence:
            out["insufficient_evidence"] = True
        if self.sufficiency is not None:
            out["sufficiency"] = self.sufficiency.to_dict()
        return out


@dataclass(frozen=True, slots=True)
class Escalation:
    """One step to a wider route, and why (the corrective step or the sufficiency check)."""

    source: str  # the strategy escalated from
    target: str
    path: str  # the wider route's evidence path
    query: str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"from": self.source, "to": self.target, "path": self.path, "query": self.query,
                "reason": self.reason}


@dataclass(frozen=True, slots=True)
class TargTrace:
    """The TARG gate: the closed-book answer's confidence against the threshold."""

    confidence: float | None
    threshold: float
    fired: bool
    ms: float

    def to_dict(self) -> dict[str, Any]:
        return {"confidence": self.confidence, "threshold": self.threshold, "fired": self.fired, "ms": self.ms}


@dataclass(frozen=True, slots=True)
class AuditTrace:
    """The citation-support audit of the answer (`amsrag.audit`): the verdict, or None when no audit ran
    (an abstention, a closed-book answer, no evidence, the audit off), with the reason."""

    verdict: SupportVerdict | None = None
    reason: str = ""
    ms: float = 0.0

    @property
    def support(self) -> float | None:
        return self.verdict.support if self.verdict is not None else None

    @property
    def flagged(self) -> bool:
        return self.verdict.flagged if self.verdict is not None else False

    def to_dict(self) -> dict[str, Any]:
        if self.verdict is None:
            return {"support": None, "flagged": False, "verdict": "not audited", "reason": self.reason,
                    "ms": round(self.ms, 3)}
        return {**self.verdict.to_dict(), "reason": self.reason, "ms": round(self.ms, 3)}


def _runs(runs: tuple[RetrieverRun, ...], passes: tuple[int, ...]) -> list[dict[str, Any]]:
    """Each run with its pass: 0 the first pass, i the wider pass that `escalations[i - 1]` ran."""
    return [{"name": r.name, "pass": passes[i] if i < len(passes) else 0, "ms": round(r.ms, 3), "error": r.error,
             "hits": [{"id": h.id, "rank": h.rank, "score": h.score} for h in r.hits[:TRACE_HITS]]}
            for i, r in enumerate(runs)]


def _fusion(fused: FusedList | None) -> dict[str, Any]:
    if fused is None:
        return {"method": "none", "weights": {}, "k": {}}
    return {"method": fused.method, "weights": fused.weights, "k": fused.k, **fused.params}


def _fused(fused: FusedList | None) -> list[dict[str, Any]]:
    if fused is None:
        return []
    return [{"id": it.id, "score": it.score, "ranks": dict(it.ranks), "contributions": dict(it.contributions)}
            for it in fused.top(TRACE_HITS)]


@dataclass(frozen=True)
class Trace(Mapping[str, Any]):
    """One query's trace. `fusion`/`fused`/`second_hop`/`adaptive_k`/`mmr` describe the first pass;
    `runs` holds every retriever run, escalated passes included, and `run_passes` the pass of each
    (0: the first pass, i: the pass `escalations[i - 1]` ran; empty: all first-pass)."""

    system: str
    complexity: ComplexityTrace | None
    strategy: str
    reason: str
    runs: tuple[RetrieverRun, ...] = ()
    run_passes: tuple[int, ...] = ()
    searches: int = 0
    fusion: FusedList | None = None
    second_hop: Expansion | None = None
    adaptive_k: AdaptiveKTrace | None = None
    mmr: MMRResult | None = None
    corrective: CorrectiveTrace = field(default_factory=CorrectiveTrace)
    escalations: tuple[Escalation, ...] = ()
    generator: GeneratorTrace | None = None  # once an answer was generated
    targ: TargTrace | None = None
    timings: Timings = field(default_factory=dict)
    taxonomy: TaxonomyDecision | None = None  # the five-way decision, when the taxonomy has more than 3 classes
    structured: TableRouteTrace | None = None  # the table route: table, SQL, rows, confidence (or why it fell back)
    global_search: GlobalRouteTrace | None = None  # the global route: the themes selected and how
    language: LanguageTrace | None = None  # the question's language (set by `ask` and `retrieve`)
    audit: AuditTrace | None = None  # the citation-support audit (set by `ask`)
    signals: ProxySignals | None = None  # the five proxy signals of the answer (set by `ask`)
    evidence: tuple[str, ...] = ()  # the ids of the passages the generator read, in order (set by `ask`)
    chain: ChainTrace | None = None  # the decomposer's plan and the chain that answered it (set by `answer`)
    parts: tuple[str, ...] = ()  # a question asking several things: its parts, each answered on its own (`ask`)
    filter: dict[str, Any] | None = None  # the metadata filter in force and how many rows it allowed (`where`)

    @property
    def retriever_calls(self) -> int:
        return len(self.runs)

    def answered(self, generator: GeneratorTrace, timings: Timings, targ: TargTrace | None = None,
                 audit: AuditTrace | None = None, evidence: tuple[str, ...] = ()) -> Trace:
        """This trace with the generator's entry, the answer's timings, its audit and the evidence it read."""
        return replace(self, generator=generator, timings=timings, targ=targ if targ is not None else self.targ,
                       audit=audit if audit is not None else self.audit, evidence=evidence or self.evidence)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "system": self.system,
            "complexity": self.complexity.to_dict() if self.complexity is not None else None,
            "strategy": self.strategy,
            "reason": self.reason,
            "retrievers": _runs(self.runs, self.run_passes),
            "retriever_calls": self.retriever_calls,
            "searches": self.searches,
            "fusion": _fusion(self.fusion),
            "fused": _fused(self.fusion),
            "second_hop": self.second_hop.to_dict() if self.second_hop is not None else None,
            "adaptive_k": self.adaptive_k.to_dict() if self.adaptive_k is not None else None,
            "mmr": self.mmr.to_dict() if self.mmr is not None else None,
            "corrective": self.corrective.to_dict(),
            "escalations": [e.to_dict() for e in self.escalations],
            "generator": self.generator.to_dict() if self.generator is not None else None,
        }
        if self.generator is not None:  # an answer's trace: the passages its generator read
            out["evidence"] = list(self.evidence)
        if self.targ is not None:
            out["targ"] = self.targ.to_dict()
        if self.taxonomy is not None:
            out["taxonomy"] = self.taxonomy.to_dict()
        if self.structured is not None:
            out["structured"] = self.structured.to_dict()
        if self.global_search is not None:
            out["global"] = self.global_search.to_dict()
        if self.language is not None:
            out["language"] = self.language.to_dict()
        if self.audit is not None:
            out["audit"] = self.audit.to_dict()
        if self.signals is not None:
            out["signals"] = self.signals.to_dict()
        if self.chain is not None:
            out["chain"] = self.chain.to_dict()
        if self.parts:
            out["parts"] = list(self.parts)
        if self.filter is not None:
            out["filter"] = self.filter
        out["timings_ms"] = dict(self.timings)
        return out

    # The JSON contract as a read-only mapping (built once: a Trace does not change).
    @cached_property
    def _dict(self) -> dict[str, Any]:
        return self.to_dict()

    def __getitem__(self, key: str) -> Any:
        return self._dict[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._dict)

    def __len__(self) -> int:
        return len(self._dict)
