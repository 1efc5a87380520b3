"""Prometheus metrics of one server (its own registry, so several apps in one process do not clash)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

if TYPE_CHECKING:
    from amsrag.monitor.drift import DriftStatus

SCORE_BUCKETS = (0.05, 0.1, 0.2, 0.3, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.8, 0.9, 0.95, 1.0)
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class Metrics:
    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        self.requests = Counter("amsrag_http_requests_total", "HTTP requests by route and status",
                                ["method", "route", "status"], registry=r)
        self.latency = Histogram("amsrag_http_request_duration_seconds", "HTTP request latency by route",
                                 ["route"], buckets=LATENCY_BUCKETS, registry=r)
        self.stage = Histogram("amsrag_stage_duration_seconds",
                               "pipeline stage latency from the trace timings (retrieve.NAME per retriever)",
                               ["stage"], buckets=LATENCY_BUCKETS, registry=r)
        self.routes = Counter("amsrag_route_total", "queries by system, complexity label and strategy",
                              ["system", "label", "strategy"], registry=r)
        self.retriever_calls = Counter("amsrag_retriever_calls_total", "retriever invocations", ["retriever"],
                                       registry=r)
        self.retriever_errors = Counter("amsrag_retriever_errors_total", "retriever failures and timeouts",
                                        ["retriever"], registry=r)
        self.escalations = Counter("amsrag_escalations_total", "corrective escalations", registry=r)
        self.abstentions = Counter("amsrag_abstentions_total", "answers that abstained", registry=r)
        self.errors = Counter("amsrag_errors_total", "error responses by stable code", ["code"], registry=r)
        self.active = Gauge("amsrag_requests_running", "engine calls running, by lane", ["lane"], registry=r)
        self.waiting = Gauge("amsrag_requests_queued", "engine calls waiting for a slot, by lane", ["lane"],
                             registry=r)
        self.passages = Gauge("amsrag_index_passages", "passages in the served index", registry=r)
        self.jobs = Counter("amsrag_jobs_total", "ingest jobs by final status", ["status"], registry=r)
        # The five proxy signals of seed 003 §6.2 (trace["signals"]), labelled by the route the query took.
        self.answers = Counter("amsrag_answers_total", "answers with proxy signals, by route", ["route"],
                               registry=r)
        self.alpha = Histogram("amsrag_route_alpha", "routing confidence (alpha) by route", ["route"],
                               buckets=SCORE_BUCKETS, registry=r)
        self.gray_zone = Counter("amsrag_gray_zone_total", "answers whose routing alpha is in the gray zone",
                                 ["route"], registry=r)
        self.support = Histogram("amsrag_citation_support", "citation-support score of audited answers, by route",
                                 ["route"], buckets=SCORE_BUCKETS, registry=r)
        self.disagreements = Counter("amsrag_evidence_confidence_disagreements_total",
                                     "confident answers the audit finds unsupported, by route", ["route"],
                                     registry=r)
        self.sufficiency_failures = Counter("amsrag_sufficiency_failures_total",
                                            "answers whose first-pass evidence failed the corrective check",
                                            ["route"], registry=r)
        self.escalated = Counter("amsrag_escalated_answers_total", "answers that escalated to a wider route "
                                 "(escalation rate = this / amsrag_answers_total)", ["route"], registry=r)
        self.flagged = Counter("amsrag_flagged_answers_total", "answers flagged (disagreement, unsure multi-hop)",
                               ["route"], registry=r)
        self.drift_psi = Gauge("amsrag_drift_psi", "population stability index of the last window of routed answers "
                               "against the drift reference, by signal (alpha, route, gray_zone)", ["signal"],
                               registry=r)
        self.drift_alarm = Gauge("amsrag_drift_alarm", "1 when a drift PSI is at or above the threshold over a "
                                 "full window (recalibrate the classifier: `amsrag ops monitor report`)", registry=r)
        self.drift_answers = Gauge("amsrag_drift_window_answers", "routed answers in the drift window (no verdict "
                                   "before it is full)", registry=r)
        # Shadow-path probes (amsrag.monitor.shadow): what became of each answer offered, and probe time.
        self.shadow_probes = Counter("amsrag_shadow_probes_total", "answers offered to the shadow prober, by "
                                     "outcome (queued probes: dropped_busy, or run then agreed / disagreed / "
                                     "timeout / failed)", ["outcome"], registry=r)
        self.shadow_latency = Histogram("amsrag_shadow_probe_duration_seconds", "time of one shadow probe (the "
                                        "widest route's answer)", buckets=LATENCY_BUCKETS, registry=r)
        self.query_log_failures = Counter("amsrag_query_log_failures_total",
                                          "answers the query log could not record", registry=r)
        self.review_enqueued = Counter("amsrag_review_enqueued_total", "answers sent to the review queue, by kind",
                                       ["kind"], registry=r)
        self.review_failures = Counter("amsrag_review_queue_failures_total",
                                       "answers the review queue could not take", registry=r)

    def admission(self, lane: str):
        running, queued = self.active.labels(lane), self.waiting.labels(lane)

        def changed(active: int, waiting: int) -> None:
            running.set(active)
            queued.set(waiting)

        return changed

    def observe_trace(self, trace: dict[str, Any]) -> None:
        timings = trace.get("timings_ms") or {}
        for stage, ms in timings.items():
            if isinstance(ms, dict):
                for name, sub in ms.items():
                    if isinstance(sub, int | float):
                        self.stage.labels(f"{stage}.{name}").observe(sub / 1000)
            elif isinstance(ms, int | float):
                self.stage.labels(stage).observe(ms / 1000)
        complexity = trace.get("complexity") or {}
        self.routes.labels(str(trace.get("system", "")), str(complexity.get("label", "")),
                           str(trace.get("strategy", ""))).inc()
        for r in trace.get("retrievers") or []:
            self.retriever_calls.labels(r.get("name", "")).inc()
            if r.get("error"):
                self.retriever_errors.labels(r.get("name", "")).inc()
        escalations = trace.get("escalations") or []
        if escalations:
            self.escalations.inc(len(escalations))
        signals = trace.get("signals")
        if signals:
            self.observe_signals(signals)

    def observe_signals(self, signals: dict[str, Any]) -> None:
        route = str(signals.get("route_label") or "none")
        self.answers.labels(route).inc()
        if isinstance(signals.get("route_alpha"), int | float):
            self.alpha.labels(route).observe(signals["route_alpha"])
        if isinstance(signals.get("support"), int | float):
            self.support.labels(route).observe(signals["support"])
        for flag, counter in (("gray_zone", self.gray_zone), ("disagreement", self.disagreements),
                              ("sufficiency_failed", self.sufficiency_failures), ("escalated", self.escalated),
                              ("flagged", self.flagged)):
            if signals.get(flag):
                counter.labels(route).inc()

    def observe_drift(self, status: DriftStatus) -> None:
        for signal, value in status.psi.items():
            self.drift_psi.labels(signal).set(value)
        self.drift_alarm.set(1 if status.alarm else 0)
        self.drift_answers.set(status.answers)

    def render(self) -> bytes:
        return generate_latest(self.registry)
