"""The five proxy signals of seed 003 §6.2, per answer.

A misroute cannot be observed (the true class is unknown), but it leaves traces: the evidence and the
answer's certainty disagree. Each signal is read from the answer's trace (the JSON contract, so a stored
query-log row gives the same signals as a live answer):

1. evidence-confidence disagreement: the generator is confident, the audit finds the cited text does not
   support the answer;
2. gray-zone alpha: the routing confidence lies in the band where the classifier is least sure;
3. sufficiency-check failure: the corrective step (or the reader's check) found the first pass's evidence
   insufficient;
4. escalation: the engine had to widen the route (the rate is the share of answers with one);
5. citation support: the audit's calibrated P(the cited text supports the answer).

`flagged` (the answer is likely wrong) combines them: an evidence-confidence disagreement; the audit's
flag on an answer whose generator gives no confidence to weigh against it; or an unsure answer (generator
confidence below `unsure_answer`) to a question routed as multi_hop, the class whose answers a too-cheap
route gets wrong. The audit's flag alone catches few wrong answers to misrouted multi-hop questions
(docs/benchmarks/misroute-flags.md, where this rule was chosen on a calibration half); it stays in
trace["audit"].
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from amsrag.config import MonitorConfig

# The signals that are rates over many answers (a share of answers with the signal), as the monitor reports them.
RATES = ("escalated", "gray_zone", "flagged", "disagreement", "sufficiency_failed")

# Corrective outcomes that mean "the first pass's evidence was not enough".
INSUFFICIENT_ACTIONS = frozenset({"incorrect", "ambiguous", "reader-escalated", "reader-kept"})
ABSTAINED = "abstained"  # the audit's reason for not auditing an abstention (there is no answer to flag)


@dataclass(frozen=True, slots=True)
class ProxySignals:
    """The five signals of one answer. `route_label`/`route_alpha`: the class and confidence routing acted
    on. `suspect`: a cheap route (not multi-hop) whose answer shows a signal of a misroute: the audit flagged
    it, it is flagged, or the evidence failed the sufficiency check; what the review queue and shadow probes
    look at first."""

    route_label: str | None
    route_alpha: float | None
    gray_zone: bool
    confidence: float | None  # the generator's confidence in its answer
    support: float | None  # the audit's citation support (None: not audited)
    disagreement: bool  # confident answer, unsupported by its citations
    sufficiency_failed: bool
    escalations: int
    flagged: bool  # disagreement, audit flag without a confidence, or unsure answer to a multi_hop route
    suspect: bool
    flag_reason: str = ""  # why it is flagged, in words ("" when it is not)

    @property
    def escalated(self) -> bool:
        return self.escalations > 0

    def to_dict(self) -> dict[str, Any]:
        return {"route_label": self.route_label, "route_alpha": self.route_alpha, "gray_zone": self.gray_zone,
                "confidence": self.confidence, "support": self.support, "disagreement": self.disagreement,
                "sufficiency_failed": self.sufficiency_failed, "escalations": self.escalations,
                "escalated": self.escalated, "flagged": self.flagged, "suspect": self.suspect,
                "flag_reason": self.flag_reason}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ProxySignals:
        return cls(data.get("route_label"), _num(data.get("route_alpha")), bool(data.get("gray_zone")),
                   _num(data.get("confidence")), _num(data.get("support")), bool(data.get("disagreement")),
                   bool(data.get("sufficiency_failed")), int(data.get("escalations") or 0),
                   bool(data.get("flagged")), bool(data.get("suspect")), str(data.get("flag_reason") or ""))


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def in_gray_zone(alpha: float | None, config: MonitorConfig) -> bool:
    return alpha is not None and config.gray_zone_low <= alpha <= config.gray_zone_high


def proxy_signals(trace: Mapping[str, Any], config: MonitorConfig | None = None) -> ProxySignals:
    """The signals of the answer whose trace (`Trace` or its `to_dict()`) is `trace`."""
    if config is None:
        from amsrag.config import MonitorConfig

        config = MonitorConfig()
    cx = trace.get("complexity") or {}
    label = cx.get("route_label", cx.get("label"))
    alpha = _num(cx.get("route_alpha", cx.get("alpha")))
    confidence = _num((trace.get("generator") or {}).get("confidence"))
    audit = trace.get("audit") or {}
    support = _num(audit.get("support"))
    audit_flagged = bool(audit.get("flagged"))
    disagreement = (audit_flagged and confidence is not None and confidence >= config.confident_answer)
    corrective = trace.get("corrective") or {}
    sufficiency = corrective.get("sufficiency") or {}
    failed = (corrective.get("action") in INSUFFICIENT_ACTIONS or bool(corrective.get("insufficient_evidence"))
              or sufficiency.get("ok") is False)
    escalations = len(trace.get("escalations") or [])
    answered = audit.get("reason") != ABSTAINED
    unsure_multi_hop = (answered and label == "multi_hop" and confidence is not None
                        and confidence < config.unsure_answer)
    unweighed = audit_flagged and confidence is None  # no confidence to weigh against: the audit's flag stands
    flagged = disagreement or unweighed or unsure_multi_hop
    reason = ("a confident answer its citations do not support" if disagreement else
              "its citations do not support it" if unweighed else
              "an unsure answer to a multi-hop question" if unsure_multi_hop else "")
    cheap = label is not None and label != "multi_hop"
    return ProxySignals(label, alpha, in_gray_zone(alpha, config), confidence, support, disagreement, failed,
                        escalations, flagged, cheap and (audit_flagged or flagged or failed), reason)
