"""Shadow-path probes (amsrag.monitor.shadow): sampling, budget, queue bound, failures that never reach a
request, the comparison's math, and a real probe through the service on the slice index."""

from __future__ import annotations

import math
import threading
import time
from typing import Any

import httpx
import pytest

from amsrag.config import MonitorConfig, ServeConfig, ShadowConfig
from amsrag.errors import InputError
from amsrag.monitor.shadow import (
    LoggingSink,
    MinuteBudget,
    MisrouteSink,
    SamplingPolicy,
    ShadowComparison,
    ShadowProber,
    already_widest,
    answer_agreement,
    compare,
    evidence_overlap,
)
from amsrag.pipeline import Engine
from amsrag.serve import Service, create_app
from amsrag.serve.background import BackgroundServer

KEY = "test-key-0123456789abcdef"


def answer(alpha: float | None = 0.55, *, text: str = "Paris", strategy: str = "B", label: str = "one_hop",
           support: float | None = 0.5, evidence: tuple[str, ...] = ("p1", "p2"), abstained: bool = False,
           escalations: tuple[tuple[str, str], ...] = ()) -> dict[str, Any]:
    """An answer body as the service returns it, with the trace fields the prober reads."""
    return {"query": "q", "answer": text, "citations": list(evidence[:1]), "abstained": abstained,
            "trace": {"system": "full", "strategy": strategy,
                      "complexity": {"label": label, "route_label": label, "route_alpha": alpha},
                      "escalations": [{"from": a, "to": b} for a, b in escalations],
                      "evidence": list(evidence), "audit": {"support": support},
                      "signals": {"route_label": label, "route_alpha": alpha}}}


class Recorder:
    """A misroute sink that keeps what it is given (the review queue is built elsewhere)."""

    def __init__(self) -> None:
        self.got: list[tuple[str, dict[str, Any], ShadowComparison]] = []

    def misroute_candidate(self, query: str, answer: dict[str, Any], comparison: ShadowComparison) -> None:
        self.got.append((query, answer, comparison))


class Gate:
    """A busy() flag the test flips."""

    def __init__(self, busy: bool) -> None:
        self.busy = busy

    def __call__(self) -> bool:
        return self.busy


def prober(wider, busy=None, sink=None, **config: Any) -> ShadowProber:
    cfg = ShadowConfig(**{"enabled": True, "gray_share": 1.0, "random_share": 0.0, **config})
    return ShadowProber(wider, cfg, MonitorConfig(), busy=busy, sink=sink or Recorder(), poll_s=0.005)


# ---------------------------------------------------------------------------- sampling
def test_gray_zone_answers_are_probed_and_confident_ones_sampled_with_a_seed() -> None:
    policy = SamplingPolicy(ShadowConfig(gray_share=1.0, random_share=0.2, seed=7), MonitorConfig())
    assert all(policy.decide("full", answer(a)).outcome == "gray" for a in (0.45, 0.55, 0.65))
    draws = [policy.decide("full", answer(0.95)) for _ in range(2000)]
    assert {d.outcome for d in draws} == {"random", "not_sampled"}
    share = sum(d.probe for d in draws) / len(draws)
    assert 0.17 < share < 0.23
    again = SamplingPolicy(ShadowConfig(gray_share=1.0, random_share=0.2, seed=7), MonitorConfig())
    assert all(again.decide("full", answer(a)).probe for a in (0.45, 0.55, 0.65))  # the same draws, in order
    assert [again.decide("full", answer(0.95)).probe for _ in range(2000)] == [d.probe for d in draws]
    never = SamplingPolicy(ShadowConfig(gray_share=0.0, random_share=0.0), MonitorConfig())
    assert never.decide("full", answer(0.5)).outcome == "not_sampled"
    # no alpha (a closed-book answer of the TARG gate): only the random share
    assert SamplingPolicy(ShadowConfig(random_share=1.0)).decide("full", answer(None)).outcome == "random"


def test_what_is_never_probed() -> None:
    policy = SamplingPolicy(ShadowConfig(gray_share=1.0, random_share=1.0), MonitorConfig())
    assert "fixed route" in policy.decide("bm25", answer()).why
    assert "fixed route" in policy.decide("no-such-system", answer()).why
    assert "table route" in policy.decide("full", answer(strategy="table", abstained=True)).why
    assert "global route" in policy.decide("full", answer(strategy="global")).why
    assert policy.decide("full", answer(strategy="C", label="multi_hop")).why == "already the widest route"
    assert policy.decide("full", {"answer": "x"}).why == "the answer has no trace"
    # an abstention on the text path is probed: a wider route may find what the cheap one missed
    assert policy.decide("full", answer(abstained=True)).probe


def test_already_widest_reads_escalations() -> None:
    assert already_widest(answer(strategy="C", label="multi_hop")["trace"])
    assert not already_widest(answer(strategy="C", label="one_hop")["trace"])
    assert already_widest(answer(strategy="C", label="one_hop", escalations=(("C", "C"),))["trace"])
    assert already_widest(answer(strategy="B", label="multi_hop", escalations=(("B", "C"),))["trace"])
    assert not already_widest(answer(strategy="A", label="one_hop", escalations=(("A", "B"),))["trace"])


# ---------------------------------------------------------------------------- budget and queue
def test_minute_budget_is_a_sliding_window() -> None:
    now = [100.0]
    budget = MinuteBudget(3, clock=lambda: now[0])
    assert [budget.take() for _ in range(4)] == [True, True, True, False]
    now[0] += 59.9
    assert not budget.take()
    now[0] += 0.2  # the first three are a minute old
    assert budget.take()
    budget.refund()
    assert [budget.take() for _ in range(3)] == [True, True, True] and not budget.take()


def test_budget_bounds_probes_per_minute() -> None:
    calls: list[str] = []
    p = prober(lambda q, s: calls.append(q) or answer(), busy=Gate(True), per_minute=2, queue_size=10)
    try:
        assert [p.offer(f"q{i}", "full", answer()) for i in range(4)] == \
            ["queued", "queued", "dropped_budget", "dropped_budget"]
    finally:
        p.close()
    assert calls == [] and p.counts["dropped_budget"] == 2


def test_queue_is_bounded_and_probes_wait_for_an_idle_server() -> None:
    calls: list[str] = []
    gate = Gate(True)
    p = prober(lambda q, s: calls.append(q) or answer(), busy=gate, per_minute=100, queue_size=2)
    try:
        outcomes = [p.offer(f"q{i}", "full", answer()) for i in range(4)]
        assert outcomes == ["queued", "queued", "dropped_queue", "dropped_queue"]
        time.sleep(0.1)
        assert calls == []  # busy: nothing ran
        gate.busy = False
        assert p.drain(10)
    finally:
        p.close()
    assert calls == ["q0", "q1"]
    assert p.counts["run"] == 2 and p.counts["agreed"] == 2 and p.counts["dropped_queue"] == 2


def test_a_probe_that_waits_too_long_for_an_idle_server_is_dropped() -> None:
    now = [0.0]
    p = ShadowProber(lambda q, s: answer(), ShadowConfig(gray_share=1.0, max_wait_s=5), busy=lambda: True,
                     clock=lambda: now[0], poll_s=0.005)
    try:
        assert p.offer("q", "full", answer()) == "queued"
        now[0] = 6.0  # the worker takes it only when idle; busy() says no, so it expires in the queue
        p.busy = lambda: False
        assert p.drain(10)
    finally:
        p.close()
    assert p.counts["dropped_busy"] == 1 and p.counts["run"] == 0


# ---------------------------------------------------------------------------- failures stay in the background
def test_a_probe_that_raises_is_counted_and_the_next_one_runs() -> None:
    seen: list[str] = []

    def wider(q: str, s: str) -> dict[str, Any]:
        seen.append(q)
        if q == "boom":
            raise RuntimeError("the wide path broke")
        return answer()

    p = prober(wider, per_minute=10)
    try:
        assert p.offer("boom", "full", answer()) == "queued"  # offer never raises
        assert p.offer("fine", "full", answer()) == "queued"
        assert p.drain(10)
    finally:
        p.close()
    assert seen == ["boom", "fine"]
    assert p.counts["failed"] == 1 and p.counts["agreed"] == 1


def test_a_slow_probe_is_abandoned_and_a_failing_sink_is_contained() -> None:
    release = threading.Event()
    running: list[str] = []

    def wider(q: str, s: str) -> dict[str, Any]:
        running.append(q)
        if q == "slow":
            release.wait(10)
        return answer(text="London")  # disagrees with "Paris"

    class Broken:
        def misroute_candidate(self, query: str, answer: dict[str, Any], comparison: ShadowComparison) -> None:
            raise ValueError("the review queue is down")

    p = prober(wider, sink=Broken(), per_minute=10, timeout_s=0.2)
    try:
        p.offer("slow", "full", answer())
        p.offer("next", "full", answer())
        time.sleep(0.6)
        assert p.counts["timeout"] == 1
        assert running == ["slow"]  # never two probes at once: the next waits for the abandoned one
        release.set()
        assert p.drain(10)
    finally:
        p.close()
    assert running == ["slow", "next"] and p.counts["disagreed"] == 1


# ---------------------------------------------------------------------------- comparison math
def test_evidence_overlap_on_hand_made_lists() -> None:
    assert evidence_overlap(["a", "b", "c"], ["a", "b", "c"]) == 1.0
    assert evidence_overlap(["a", "b"], ["c", "d"]) == 0.0
    assert evidence_overlap([], []) == 1.0 and evidence_overlap(["a"], []) == 0.0
    # swapped pair: each list's DCG under the other's grades is 2/log2(3), the ideal 1 + 1/log2(3)^2
    swapped = (2 / math.log2(3)) / (1 + 1 / math.log2(3) ** 2)
    assert evidence_overlap(["a", "b"], ["b", "a"]) == pytest.approx(swapped)
    assert swapped == pytest.approx(0.9026, abs=1e-4)
    # a prefix: all of b's grade found (1.0), a third of a's ideal found first-ranked (1 / 1.6481)
    prefix = (1 / (1 + 1 / math.log2(3) ** 2 + 1 / 4) + 1.0) / 2
    assert evidence_overlap(["a", "b", "c"], ["a"]) == pytest.approx(prefix)
    assert evidence_overlap(["a", "a", "b"], ["a", "b"]) == 1.0  # repeats count once
    # the top weighs most: agreeing on the first passage beats agreeing on the last
    assert evidence_overlap(["a", "b", "c"], ["a", "x", "y"]) > evidence_overlap(["a", "b", "c"], ["x", "y", "c"])


def test_answer_agreement() -> None:
    assert answer_agreement("The Eiffel Tower", False, "eiffel tower", False) == (True, 1.0)
    em, f1 = answer_agreement("New York City", False, "New York", False)
    assert not em and f1 == pytest.approx(0.8)
    assert answer_agreement("Paris", False, "London", False) == (False, 0.0)
    assert answer_agreement("", True, "", True) == (True, 1.0)
    assert answer_agreement("Paris", False, "", True) == (False, 0.0)
    assert answer_agreement("北京大学", False, "北京", False)[1] == pytest.approx(2 / 3)


def test_comparison_disagrees_on_answers_or_support() -> None:
    cfg = ShadowConfig(min_f1=0.5, support_margin=0.2)
    same = compare("q", "full", answer(support=0.5), answer(support=0.6, strategy="C"), cfg)
    assert not same.disagrees and same.exact_match and same.f1 == 1.0 and same.evidence_overlap == 1.0
    assert same.route == "one_hop/B" and same.shadow_route == "one_hop/C"
    assert same.support_gain == pytest.approx(0.1)
    other = compare("q", "full", answer(), answer(text="London", evidence=("p3", "p1")), cfg)
    assert other.disagrees and other.reasons == ("the answers differ (token F1 0.00 < 0.5)",)
    assert 0 < other.evidence_overlap < 1 and other.citation_overlap == 0.0
    better = compare("q", "full", answer(support=0.3), answer(support=0.7), cfg)
    assert better.disagrees and "support 0.70 is +0.40 above" in better.reasons[0]
    lost = compare("q", "full", answer(), answer(abstained=True, text="insufficient evidence", support=None), cfg)
    assert lost.reasons == ("the wider path abstained",) and lost.support_gain is None
    d = other.to_dict()
    assert d["disagrees"] is True and d["f1"] == 0.0 and "shadow" not in d
    assert other.to_dict(with_shadow=True)["shadow"]["answer"] == "London"


def test_logging_sink_counts_and_redacts(caplog) -> None:
    sink = LoggingSink(redact=lambda s: s.replace("secret", "[redacted]"))
    assert isinstance(sink, MisrouteSink)
    comparison = compare("the secret plan", "full", answer(), answer(text="London"), ShadowConfig())
    with caplog.at_level("WARNING", logger="amsrag.monitor"):
        sink.misroute_candidate("the secret plan", answer(), comparison)
    assert sink.count == 1
    assert "[redacted]" in caplog.text and "secret" not in caplog.text and "London" in caplog.text


# ---------------------------------------------------------------------------- the real path
def test_widest_route_is_forced_on_the_engine(built_index, slice_questions) -> None:
    engine = Engine(built_index)
    q = slice_questions[1].question
    routed = engine.ask(q)
    assert routed.trace.strategy != "C"  # the slice's question 1 routes cheaper than C
    wide = engine.ask(q, widest=True).to_dict()["trace"]
    assert wide["strategy"] == "C" and wide["reason"].startswith("widest route forced")
    assert {r["name"] for r in wide["retrievers"]} == {"dense", "bm25", "graph"}
    assert wide["second_hop"] is not None and wide["evidence"] and wide["audit"]["verdict"]
    assert wide["complexity"]["label"] == routed.trace["complexity"]["label"]  # the classifier's view kept
    with pytest.raises(InputError, match="fixed route"):
        engine.ask(q, system="bm25", widest=True)


@pytest.mark.slow
def test_a_forced_probe_runs_the_wider_path_through_the_service(built_index, slice_questions, tmp_path) -> None:
    import shutil

    index_dir = tmp_path / "index"
    shutil.copytree(built_index.path, index_dir, ignore=shutil.ignore_patterns("*-shm", ".write.lock"))
    sink = Recorder()
    # random_share 1: every eligible answer is probed; support_margin 0: every audited probe reaches the sink
    shadow = ShadowConfig(enabled=True, gray_share=1.0, random_share=1.0, per_minute=10, support_margin=0.0)
    service = Service(Engine.open(index_dir), ServeConfig(api_keys=[KEY]), shadow=shadow, misroutes=sink)
    assert service.shadow is not None
    server = BackgroundServer(create_app(service))
    server.start()
    try:
        with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {KEY}"}, timeout=120) as http:
            q = slice_questions[1].question
            r = http.post("/v1/ask", json={"question": q})
            assert r.status_code == 200, r.text
            body = r.json()
            assert service.shadow.drain(120)
            fixed = http.post("/v1/ask", json={"question": q, "system": "bm25"})  # a fixed route: not probed
            assert fixed.status_code == 200
            service.shadow.wider = lambda q, s: 1 / 0  # a probe that raises never fails the request
            again = http.post("/v1/ask", json={"question": slice_questions[2].question})
            assert again.status_code == 200, again.text
            assert service.shadow.drain(60)
            metrics = http.get("/metrics").text
    finally:
        server.stop()
        service.close()
    counts = service.shadow.counts
    assert counts["queued"] == 2 and counts["run"] == 2 and counts["ineligible"] == 1 and counts["failed"] == 1
    assert 'amsrag_shadow_probes_total{outcome="run"} 2.0' in metrics
    assert 'amsrag_shadow_probes_total{outcome="failed"} 1.0' in metrics
    assert "amsrag_shadow_probe_duration_seconds_count 2.0" in metrics  # failed probes take time too
    comparison = service.shadow.comparisons[0]
    assert isinstance(comparison, ShadowComparison) and comparison.query == q
    wide = comparison.shadow["trace"]
    assert wide["strategy"] == "C" and wide["reason"].startswith("widest route forced")
    assert wide["second_hop"] is not None and wide["signals"] and wide["audit"]["support"] is not None
    assert comparison.route == f"{body['trace']['complexity']['route_label']}/{body['trace']['strategy']}"
    assert comparison.answer == body["answer"] and comparison.support == body["trace"]["audit"]["support"]
    assert comparison.shadow_answer == comparison.shadow["answer"]
    assert 0.0 <= comparison.evidence_overlap <= 1.0 and body["trace"]["evidence"]
    # support_margin 0: an audited probe whose support did not drop is a candidate, with the answer returned
    assert [(query, a["answer"]) for query, a, _ in sink.got] == [(q, body["answer"])]


def test_serve_shadow_flag_turns_the_prober_on(built_index, tmp_path, monkeypatch) -> None:
    import shutil

    import uvicorn

    from amsrag.serve.launch import run

    index_dir = tmp_path / "index"
    shutil.copytree(built_index.path, index_dir, ignore=shutil.ignore_patterns("*-shm", ".write.lock"))
    apps: list[Any] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kwargs: apps.append(app))  # no server: the app is enough
    run(index_dir, shadow=True)
    run(index_dir)  # the index's [shadow] section: off by default
    on, off = (app.state.service.shadow for app in apps)
    assert off is None and isinstance(on, ShadowProber) and on.config.enabled
    assert on.busy() is False  # wired to the admission lanes: nothing in flight
    assert on.counts == {}  # closed with its service, nothing offered


def test_misroute_candidates_enter_the_review_queue(built_index, slice_questions, tmp_path) -> None:
    import shutil

    from amsrag.config import ReviewConfig

    index_dir = tmp_path / "index"
    shutil.copytree(built_index.path, index_dir, ignore=shutil.ignore_patterns("*-shm", ".write.lock"))
    shadow = ShadowConfig(enabled=True, gray_share=1.0, random_share=1.0, per_minute=10, support_margin=0.0)
    service = Service(Engine.open(index_dir), ServeConfig(), review_config=ReviewConfig(enabled=True),
                      shadow=shadow)
    try:
        assert service.shadow is not None and service.review_queue is not None
        q = slice_questions[1].question
        body = service.ask(q, "full")
        assert service.shadow.drain(120)
        service.flush_review()
        assert service.shadow.comparisons and service.shadow.comparisons[0].disagrees
        shadow_items = [i for i in service.review_queue.items("open", 50, 0) if i.kind == "shadow"]
    finally:
        service.close()
    assert len(shadow_items) == 1
    item = shadow_items[0].to_dict()
    assert item["query"] == q and item["answer"]["answer"] == body["answer"]
    assert item["reason"].startswith("shadow probe: ") and item["details"]["shadow_route"].endswith("/C")


def test_the_retriever_pool_is_started_before_any_probe_runs() -> None:
    from amsrag.pipeline.execute import RetrieverExecutor

    executor = RetrieverExecutor(max_workers=3)
    try:
        executor.prestart()
        workers = [t for t in threading.enumerate() if t.name.startswith("amsrag-retrieve")]
        assert len(workers) >= 3  # every worker exists before a (niced) probe could create one
    finally:
        executor.close()
