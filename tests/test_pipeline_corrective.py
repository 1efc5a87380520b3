"""The corrective step inside the engine (DESIGN §6): actions, escalation, external sources, sufficiency."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import pytest

from amsrag.config import ExternalSourceConfig
from amsrag.pipeline import Engine

pytestmark = pytest.mark.slow  # the evaluator embeds every sentence of the evidence


class _Search(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        q = parse_qs(urlparse(self.path).query).get("q", [""])[0]
        body = json.dumps({"results": [
            {"id": "w1", "title": "Web result", "text": f"An external page about {q}. <script>x()</script>",
             "url": "https://example.org/a", "score": 1.0}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="module")
def search_server():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Search)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/search"
    srv.shutdown()


def _engine(index, **corrective) -> Engine:
    config = index.config.model_copy(deep=True)
    config.corrective = config.corrective.model_copy(update={"on_retrieve": True, "discard_incorrect": True,
                                                             **corrective})
    return Engine(index, config=config)


def test_full_assesses_the_evidence_and_A4_does_not(built_index, slice_questions) -> None:
    engine = Engine(built_index)
    q = next(q for q in slice_questions if q.dataset == "nq").question
    assert engine.retrieve(q, system="full").trace["corrective"]["action"] == "skipped"  # on_retrieve off
    assert engine.ask(q).trace["corrective"]["action"] != "skipped"  # always before an answer
    full = engine.retrieve(q, system="full", corrective=True).trace
    assert full["corrective"]["action"] in {"correct", "ambiguous", "incorrect"}
    assert 0.0 <= full["corrective"]["score"] <= 1.0 and "corrective" in full["timings_ms"]
    assert engine.retrieve(q, system="A4").trace["corrective"] == {"score": None, "action": "skipped"}


def test_correct_evidence_is_refined_into_strips_without_escalation(built_index, slice_questions) -> None:
    engine = _engine(built_index, upper=0.0, lower=0.0, sufficiency=False)  # every list counts as correct
    q = slice_questions[0].question
    result = engine.retrieve(q, system="full")
    assert result.trace["corrective"]["action"] == "correct" and result.trace["escalations"] == []
    assert result.strips and {s.passage_id for s in result.strips} <= {p.id for p in result.passages}
    # the evidence itself is unchanged: the first pass without the step
    assert result.passages == engine.retrieve(q, system="full", corrective=False).passages


def test_incorrect_evidence_escalates_to_the_wider_strategy_with_a_rewritten_query(built_index, slice_questions):
    engine = _engine(built_index, upper=1.0, lower=1.0, sufficiency=False)  # every list counts as incorrect
    q = next(q for q in slice_questions if q.dataset == "nq").question
    result = engine.retrieve(q, system="full")
    trace = result.trace
    assert trace["corrective"]["action"] == "incorrect"
    (step,) = trace["escalations"]
    order = "ABC"
    assert order.index(step["to"]) > order.index(step["from"]) or step["from"] == step["to"] == "C"
    assert step["query"] == trace["corrective"]["rewritten_query"]
    assert trace["retriever_calls"] == len(trace["retrievers"]) > len(engine.router.route(
        trace["complexity"].get("route_label", trace["complexity"]["label"]),
        trace["complexity"].get("route_alpha", trace["complexity"]["alpha"])).retrievers)
    # each run names its pass: the first pass's retrievers (the ones fused), then the escalation's
    first = [r["name"] for r in trace["retrievers"] if r["pass"] == 0]
    assert first == list(trace["timings_ms"]["retrieve"]) == list(trace["fusion"]["weights"])
    assert [r["name"] for r in trace["retrievers"] if r["pass"] == 1] == list(trace["timings_ms"]["escalated_retrieve"])
    assert {r["pass"] for r in trace["retrievers"]} == {0, 1}
    assert result.passages  # the escalated pass replaced the discarded evidence


def test_external_sources_join_the_evidence_when_it_is_judged_incorrect(built_index, slice_questions,
                                                                        search_server) -> None:
    config = built_index.config.model_copy(deep=True)
    config.corrective = config.corrective.model_copy(update={"upper": 1.0, "lower": 1.0, "sufficiency": False,
                                                             "max_escalations": 0, "on_retrieve": True,
                                                             "discard_incorrect": True})
    config.external.sources = [ExternalSourceConfig(name="web", url=search_server, timeout_s=2.0)]
    config.external.budget_ms = 3000
    engine = Engine(built_index, config=config)  # not closed: the session's index stays open
    try:
        result = engine.retrieve(slice_questions[0].question, system="full")
    finally:
        engine.external.close()
    ext = [p for p in result.passages if p.id.startswith("ext:")]
    assert len(ext) == 1 and ext[0].row == -1 and "<script>" not in ext[0].text
    assert result.trace["corrective"]["external"]["error"] is None and result.trace["escalations"] == []


def test_missing_entities_escalate_once_for_sufficiency(built_index) -> None:
    engine = _engine(built_index, upper=0.0, lower=0.0)  # correct, so only the sufficiency check can escalate
    result = engine.retrieve("Where was Zorblax Quintavelli born?", system="full")
    suff = result.trace["corrective"]["sufficiency"]
    assert suff["ok"] is False and "Zorblax Quintavelli" in " ".join(suff["missing"])
    (step,) = result.trace["escalations"]
    assert step["reason"].startswith("sufficiency")


def test_incorrect_evidence_is_kept_behind_the_wider_pass_by_default(built_index, slice_questions) -> None:
    engine = _engine(built_index, upper=1.0, lower=1.0, sufficiency=False, discard_incorrect=False)
    q = next(q for q in slice_questions if q.dataset == "nq").question
    first = engine.retrieve(q, system="full", corrective=False).passages
    result = engine.retrieve(q, system="full")
    assert result.trace["escalations"] and result.passages[0].id == first[0].id
