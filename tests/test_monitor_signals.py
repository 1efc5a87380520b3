"""The five proxy signals (issue 22 item 2): read from a trace, carried by `ask`, exported on /metrics."""

from __future__ import annotations

import pytest

from amsrag.audit.signals import ProxySignals, proxy_signals
from amsrag.config import AmsragConfig, MonitorConfig
from amsrag.errors import InputError
from amsrag.querylog.entry import entry_from_answer
from amsrag.serve.metrics import Metrics


def _trace(label="one_hop", alpha=0.55, confidence=0.9, support=0.2, flagged=True, action="correct",
           escalations=0, sufficiency_ok=True):
    return {"complexity": {"label": label, "alpha": alpha, "route_label": label, "route_alpha": alpha},
            "generator": {"name": "span-reader", "confidence": confidence},
            "audit": {"support": support, "flagged": flagged},
            "corrective": {"action": action, "sufficiency": {"ok": sufficiency_ok}},
            "escalations": [{"from": "B", "to": "C"}] * escalations, "strategy": "B", "system": "full"}


def test_confident_unsupported_answer_is_a_disagreement_in_the_gray_zone() -> None:
    s = proxy_signals(_trace())
    assert (s.gray_zone, s.disagreement, s.flagged, s.suspect) == (True, True, True, True)
    assert s.support == 0.2 and s.confidence == 0.9 and not s.sufficiency_failed and not s.escalated
    assert s.flag_reason == "a confident answer its citations do not support"


def test_supported_confident_answer_outside_the_band_raises_nothing() -> None:
    s = proxy_signals(_trace(alpha=0.93, support=0.9, flagged=False))
    assert not (s.gray_zone or s.disagreement or s.flagged or s.suspect or s.sufficiency_failed)


def test_unsure_answer_flagged_by_the_audit_is_not_a_disagreement() -> None:
    s = proxy_signals(_trace(confidence=0.3))
    assert not s.flagged and not s.disagreement
    assert s.suspect  # a cheap route the audit flagged is still a misroute suspect


@pytest.mark.parametrize("label,confidence,reason,flagged", [
    ("multi_hop", 0.3, "", True),  # an unsure answer to a question routed as multi-hop
    ("multi_hop", 0.49, "", True),
    ("multi_hop", 0.5, "", False),  # at the threshold: sure enough
    ("multi_hop", 0.1, "abstained", False),  # an abstention is no answer to flag
    ("one_hop", 0.3, "", False),
    ("zero_hop", 0.3, "", False),
    (None, 0.3, "", False),  # no route (a closed-book answer)
])
def test_unsure_multi_hop_answer_is_flagged(label, confidence, reason, flagged) -> None:
    trace = _trace(label=label, confidence=confidence, support=0.8, flagged=False)
    trace["audit"]["reason"] = reason
    if label is None:
        del trace["complexity"]
    s = proxy_signals(trace)
    assert s.flagged is flagged and not s.disagreement and not s.suspect
    assert proxy_signals(trace, MonitorConfig(unsure_answer=0.2)).flagged is False


def test_audit_flag_stands_when_the_generator_gives_no_confidence() -> None:
    assert proxy_signals(_trace(confidence=None)).flagged  # an LLM without confidence: the audit decides
    assert not proxy_signals(_trace(confidence=None, flagged=False)).flagged
    assert not proxy_signals(_trace(confidence=0.6)).flagged  # weighed: neither confident nor a multi_hop route


@pytest.mark.parametrize("action,ok,failed", [("incorrect", True, True), ("ambiguous", True, True),
                                             ("reader-escalated", True, True), ("correct", False, True),
                                             ("reader-accepted", True, False), ("skipped", True, False)])
def test_sufficiency_failures(action, ok, failed) -> None:
    assert proxy_signals(_trace(action=action, sufficiency_ok=ok, flagged=False)).sufficiency_failed is failed


def test_multi_hop_route_is_never_a_misroute_suspect() -> None:
    s = proxy_signals(_trace(label="multi_hop", escalations=2))
    assert s.flagged and not s.suspect and s.escalations == 2 and s.escalated


def test_band_is_configurable_and_checked() -> None:
    assert not proxy_signals(_trace(alpha=0.55), MonitorConfig(gray_zone_low=0.6, gray_zone_high=0.8)).gray_zone
    with pytest.raises(InputError, match="gray_zone_low"):
        AmsragConfig.from_toml("[monitor]\ngray_zone_low = 0.7\ngray_zone_high = 0.5\n")


def test_round_trip_and_missing_parts() -> None:
    s = proxy_signals(_trace())
    assert ProxySignals.from_dict(s.to_dict()) == s
    bare = proxy_signals({"strategy": "none"})  # a closed-book answer: no route, no audit
    assert bare.route_alpha is None and bare.support is None and not bare.gray_zone and not bare.flagged


def test_metrics_and_query_log_carry_the_signals() -> None:
    trace = _trace(escalations=1, action="incorrect")
    trace["signals"] = proxy_signals(trace).to_dict()
    metrics = Metrics()
    metrics.observe_trace(trace)
    text = metrics.render().decode()
    for line in ('amsrag_answers_total{route="one_hop"} 1.0', 'amsrag_gray_zone_total{route="one_hop"} 1.0',
                 'amsrag_evidence_confidence_disagreements_total{route="one_hop"} 1.0',
                 'amsrag_sufficiency_failures_total{route="one_hop"} 1.0',
                 'amsrag_escalated_answers_total{route="one_hop"} 1.0',
                 'amsrag_flagged_answers_total{route="one_hop"} 1.0',
                 'amsrag_citation_support_count{route="one_hop"} 1.0'):
        assert line in text, line
    entry = entry_from_answer({"query": "q", "answer": "a", "citations": [], "abstained": False, "trace": trace})
    assert entry.flagged and entry.signals["proxy"]["disagreement"] is True


def test_flag_reasons_name_the_rule_that_fired() -> None:
    unsure = proxy_signals(_trace(label="multi_hop", confidence=0.3, support=0.9, flagged=False))
    assert unsure.flagged and unsure.flag_reason == "an unsure answer to a multi-hop question"
    unweighed = proxy_signals(_trace(confidence=None))
    assert unweighed.flagged and unweighed.flag_reason == "its citations do not support it"
    fine = proxy_signals(_trace(alpha=0.93, support=0.9, flagged=False))
    assert not fine.flagged and fine.flag_reason == ""
