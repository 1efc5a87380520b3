"""The review loop: the durable queue (dedupe, bad input, threads and a second process), the service queueing
a real flagged answer, the HTTP API and its key rule, the CLI, and reviews round-tripping into a recalibrated
classifier and the query library."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from amsrag.cli.main import app as cli_app
from amsrag.config import ReviewConfig, ServeConfig
from amsrag.errors import InputError
from amsrag.pipeline import Engine
from amsrag.review import FILE, ReviewCandidate, ReviewQueue, answer_body, candidate_of, open_review_queue
from amsrag.serve.app import create_app
from amsrag.serve.service import Service
from test_audit import ScriptedLLM
from test_serve_api import KEY, copy_index

SRC = Path(__file__).resolve().parents[1] / "src"
NONSENSE = "purple elephant quartet"


def _candidate(question: str, kind: str = "flagged", system: str = "full") -> ReviewCandidate:
    trace = {"complexity": {"label": "one_hop", "alpha": 0.6, "route_label": "one_hop", "route_alpha": 0.6},
             "strategy": "B", "signals": {"flagged": True, "route_label": "one_hop"}, "audit": {"support": 0.1}}
    body = answer_body({"query": question, "answer": "x", "citations": ["p1"], "trace": trace},
                       [{"id": "p1", "title": "T", "text": "t" * 2000}])
    return ReviewCandidate(kind, "why", question, system, body)  # type: ignore[arg-type]


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


# ---------------------------------------------------------------------------- the queue
def test_queue_is_durable_dedupes_and_keeps_reviews(tmp_path) -> None:
    path = tmp_path / FILE
    with ReviewQueue(path) as q:
        a = q.add(_candidate("Who founded the Acme Corporation?"))
        assert a is not None
        assert q.add(_candidate("who founded the acme corporation")) == a  # the same question: refreshed
        b = q.add(_candidate("Who founded the Acme Corporation?", system="bm25"))  # another system: its own item
        assert b not in (None, a)
        c = q.add(_candidate("Where is Acme based?", kind="suspect"))
    with ReviewQueue(path) as q:  # reopened: everything is there
        assert q.counts() == {"open": 3, "reviewed": 0, "dismissed": 0}
        item = q.get(a)
        assert item is not None and item.seen == 2 and item.kind == "flagged" and item.status == "open"
        assert item.answer["sources"][0]["text"] == "t" * 600  # cited text stored cut
        assert item.answer["complexity"]["route_label"] == "one_hop" and item.answer["signals"]["flagged"]
        reviewed = q.mark(a, "wrong", "multi_hop", "needs the founder's company too")
        assert reviewed.status == "reviewed" and reviewed.review is not None
        assert (reviewed.review.verdict, reviewed.review.true_class) == ("wrong", "multi_hop")
        assert q.dismiss(c, "duplicate").status == "dismissed"
        assert q.add(_candidate("Who founded the Acme Corporation?")) is None  # reviewed: does not enter again
        assert [i.id for i in q.items("open")] == [b]
        assert {i.id for i in q.items(None)} == {a, b, c}
        # the item keeps the latest phrasing (its answer is the latest one's)
        assert q.labelled() == [("who founded the acme corporation", "multi_hop")]
        assert q.mark(a, "right", "one_hop").review.true_class == "one_hop"  # type: ignore[union-attr]
        assert q.labelled() == [("who founded the acme corporation", "one_hop")]  # the latest review wins
    with ReviewQueue(path) as q:
        assert q.counts() == {"open": 1, "reviewed": 1, "dismissed": 1}
        assert q.get(a).review.note == ""  # type: ignore[union-attr]


def test_queue_refuses_bad_input_clearly(tmp_path) -> None:
    with ReviewQueue(tmp_path / FILE) as q:
        item = q.add(_candidate("What is the capital of France?"))
        assert item is not None
        for call, words in [
            (lambda: q.mark(item, "maybe"), "unknown verdict 'maybe'"),
            (lambda: q.mark(item, "right", "two_hop"), "unknown true class 'two_hop'"),
            (lambda: q.mark(9999, "right"), "no review item 9999"),
            (lambda: q.dismiss(9999), "no review item 9999"),
            (lambda: q.mark(item, "right", None, "x" * 5000), "the note is 5000 characters"),
            (lambda: q.items("closed"), "unknown review status 'closed'"),
            (lambda: q.items("open", limit=0), "limit must be between 1"),
            (lambda: q.add(_candidate("   ?  ")), "non-empty question"),
            (lambda: q.add(_candidate("Fine?", kind="odd")), "unknown review item kind 'odd'"),
        ]:
            with pytest.raises(InputError, match=words):
                call()
        assert q.get(item).status == "open"  # type: ignore[union-attr]  # nothing changed
    with pytest.raises(InputError, match="max_open"):
        ReviewQueue(tmp_path / "other.sqlite", max_open=0)


def test_queue_retention_and_size(tmp_path) -> None:
    clock = Clock()
    with ReviewQueue(tmp_path / FILE, max_open=3, retention_days=10, clock=clock) as q:
        first = q.add(_candidate("Question one?"))
        assert first is not None
        q.mark(first, "right", "one_hop")
        dismissed = q.add(_candidate("Question two?"))
        assert dismissed is not None
        q.dismiss(dismissed)
        for i in range(5):
            clock.now += timedelta(minutes=1)
            q.add(_candidate(f"Open question {i}?"))
        assert [i.query for i in q.items("open")] == ["Open question 4?", "Open question 3?", "Open question 2?"]
        clock.now += timedelta(days=11)
        q.add(_candidate("A late question?"))
        # past the retention: open and dismissed items go, the review stays (it is labelled data)
        assert q.counts() == {"open": 1, "reviewed": 1, "dismissed": 0}


_WORKER = """
import sys
from amsrag.review import ReviewCandidate, ReviewQueue
q = ReviewQueue(sys.argv[1])
for i in range(60):
    q.add(ReviewCandidate("suspect", "why", f"process question {i}?", "full", {"answer": str(i)}))
    q.add(ReviewCandidate("flagged", "why", "shared question?", "full", {"answer": "p"}))
q.close()
"""


@pytest.mark.slow
def test_queue_is_safe_across_threads_and_a_second_process(tmp_path) -> None:
    path = tmp_path / FILE
    with ReviewQueue(path) as q:
        env = {**os.environ, "PYTHONPATH": str(SRC)}
        proc = subprocess.Popen([sys.executable, "-c", _WORKER, str(path)], env=env, stderr=subprocess.PIPE)
        errors: list[BaseException] = []

        def work(t: int) -> None:
            try:
                for i in range(40):
                    q.add(_candidate(f"thread {t} question {i}?"))
                    q.add(_candidate("shared question?"))
                    if i % 10 == 0:
                        q.items("open", limit=5)
            except BaseException as exc:  # reported below
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(t,)) for t in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        _, stderr = proc.communicate(timeout=120)
        assert proc.returncode == 0, stderr.decode()
        assert not errors, errors
        # every distinct question once; the shared one a single open item seen by every writer
        assert q.counts()["open"] == 3 * 40 + 60 + 1
        shared = [i for i in q.items("open", limit=1000) if i.query == "shared question?"]
        assert len(shared) == 1 and shared[0].seen == 3 * 40 + 60


def test_open_review_queue_says_how_to_start(tmp_path, built_index) -> None:
    with pytest.raises(InputError, match="no amsrag index"):
        open_review_queue(tmp_path)
    index = copy_index(built_index, tmp_path / "index")
    with pytest.raises(InputError, match=r"\[review\] enabled = true"):
        open_review_queue(index)
    with pytest.raises(InputError, match="PostgreSQL"):
        open_review_queue("postgresql://user@localhost/db")
    open_review_queue(index, create=True).close()
    assert (index / FILE).is_file()


def test_candidate_of_reads_the_signals() -> None:
    answer = {"query": "Q?", "answer": "a", "trace": {"signals": {"flagged": False, "suspect": True,
                                                                  "sufficiency_failed": True,
                                                                  "route_label": "one_hop", "route_alpha": 0.5}}}
    c = candidate_of(answer, "full")
    assert c is not None and c.kind == "suspect" and "sufficiency check" in c.reason and "alpha 0.50" in c.reason
    assert candidate_of(answer, "full", suspects=False) is None
    assert candidate_of({"query": "Q?", "trace": {"signals": {"flagged": False}}}, "full") is None


# ---------------------------------------------------------------------------- the service and the API
def _service(index: Path, review: bool = True, **serve) -> Service:
    engine = Engine.open(index)
    scripted = ScriptedLLM(NONSENSE)
    return Service(engine, ServeConfig(**serve), ask=lambda q, s: engine.ask(q, system=s, generator=scripted),
                   review_config=ReviewConfig(enabled=review))


@pytest.fixture(scope="module")
def flagged_service(built_index, tmp_path_factory):
    service = _service(copy_index(built_index, tmp_path_factory.mktemp("review") / "index"), api_keys=[KEY])
    yield service
    service.close()


def test_service_queues_a_real_flagged_answer(flagged_service, slice_questions) -> None:
    service = flagged_service
    q = slice_questions[0].question
    out = service.ask(q, "full")
    assert out["trace"]["signals"]["flagged"] is True and out["answer"] == NONSENSE
    service.flush_review()
    assert service.review_queue is not None
    [item] = [i for i in service.review_queue.items("open") if i.query == q]
    assert item.kind == "flagged" and item.system == "full" and item.answer["answer"] == NONSENSE
    assert item.answer["citations"] == out["citations"] and item.answer["sources"][0]["id"] == out["citations"][0]
    assert item.answer["signals"] == out["trace"]["signals"] and item.answer["audit"] == out["trace"]["audit"]
    assert item.answer["complexity"] == out["trace"]["complexity"]
    assert item.answer["strategy"] == out["trace"]["strategy"]
    assert "the audit flags the answer" in item.reason
    service.ask(q, "full")
    service.flush_review()
    assert service.review_queue.get(item.id).seen == 2  # type: ignore[union-attr]
    assert b'amsrag_review_enqueued_total{kind="flagged"} 2.0' in service.metrics.render()


def test_a_broken_queue_never_fails_an_answer(built_index, tmp_path, slice_questions) -> None:
    service = _service(copy_index(built_index, tmp_path / "index"))
    try:
        assert service.review_queue is not None
        service.review_queue.close()  # the database is gone from under the service
        out = service.ask(slice_questions[1].question, "full")
        assert out["answer"] == NONSENSE
        service.flush_review()
        assert b"amsrag_review_queue_failures_total 1.0" in service.metrics.render()
    finally:
        service.close()
    off = _service(copy_index(built_index, tmp_path / "off"), review=False)
    try:
        off.ask(slice_questions[1].question, "full")
        assert off.review_queue is None and not (tmp_path / "off" / FILE).exists()
        r = TestClient(create_app(off, warm=False), base_url="http://localhost").get("/v1/review")
        assert r.status_code == 404 and r.json()["error"]["code"] == "review_off"
        assert "amsrag serve --review" in r.json()["error"]["message"]
    finally:
        off.close()


def test_review_api(flagged_service, slice_questions) -> None:
    service = flagged_service
    q = slice_questions[2].question
    service.ask(q, "full")
    service.flush_review()
    client = TestClient(create_app(service, warm=False), base_url="http://localhost")
    assert client.get("/v1/review").status_code == 401  # keys configured: required, as everywhere
    auth = {"Authorization": f"Bearer {KEY}"}
    listing = client.get("/v1/review?status=open&limit=100", headers=auth).json()
    [item] = [i for i in listing["items"] if i["query"] == q]
    assert listing["counts"]["open"] == len(listing["items"])
    assert client.get(f"/v1/review/{item['id']}", headers=auth).json() == item
    bad = client.post(f"/v1/review/{item['id']}", headers=auth, json={"verdict": "maybe"})
    assert bad.status_code == 400 and "unknown verdict 'maybe'" in bad.json()["error"]["message"]
    bad = client.post(f"/v1/review/{item['id']}", headers=auth, json={"verdict": "wrong", "true_class": "x"})
    assert bad.status_code == 400 and "unknown true class 'x'" in bad.json()["error"]["message"]
    assert client.post("/v1/review/99999", headers=auth, json={"verdict": "right"}).status_code == 404
    assert client.get("/v1/review?status=closed", headers=auth).status_code == 400
    done = client.post(f"/v1/review/{item['id']}", headers=auth,
                       json={"verdict": "wrong", "true_class": "multi_hop", "note": "n"}).json()
    assert done["status"] == "reviewed" and done["review"]["true_class"] == "multi_hop"
    assert item["id"] not in [i["id"] for i in client.get("/v1/review", headers=auth).json()["items"]]
    reviewed = client.get("/v1/review?status=reviewed", headers=auth).json()["items"]
    assert [i["id"] for i in reviewed] == [item["id"]]
    other = slice_questions[3].question
    service.ask(other, "full")
    service.flush_review()
    [open_item] = [i for i in client.get("/v1/review", headers=auth).json()["items"] if i["query"] == other]
    gone = client.post(f"/v1/review/{open_item['id']}/dismiss", headers=auth, json={"note": "not a misroute"})
    assert gone.json()["status"] == "dismissed" and gone.json()["review"] is None
    assert client.get("/v1/config", headers=auth).json()["review"] == {"enabled": True}
    assert client.get("/review").status_code == 200  # the web UI's review page


def test_reviews_need_a_key_off_loopback(built_index, tmp_path) -> None:
    index = copy_index(built_index, tmp_path / "index")
    for host, status in (("0.0.0.0", 403), ("127.0.0.1", 200)):
        service = _service(index, host=host)  # no API keys
        try:
            r = TestClient(create_app(service, warm=False), base_url="http://localhost").get("/v1/review")
            assert r.status_code == status, r.text
            if status == 403:
                error = r.json()["error"]
                assert error["code"] == "review_needs_key" and "AMSRAG_API_KEYS" in error["message"]
                assert "0.0.0.0" in error["message"]
        finally:
            service.close()


# ---------------------------------------------------------------------------- the CLI and the round trip
def _cli(*args: str | Path) -> str:
    result = CliRunner().invoke(cli_app, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return result.stdout


def _cli_error(*args: str | Path) -> str:
    result = CliRunner().invoke(cli_app, [str(a) for a in args])
    assert result.exit_code == 2, result.output
    return result.stderr


def test_review_cli(tmp_path, built_index) -> None:
    index = copy_index(built_index, tmp_path / "index")
    with open_review_queue(index, create=True) as q:
        a = q.add(_candidate("Who wrote the Acme charter?"))
        b = q.add(_candidate("When did Acme open?", kind="suspect"))
    listed = [json.loads(line) for line in _cli("ops", "review", "list", "--index", index, "--json").splitlines()]
    assert {i["id"] for i in listed} == {a, b}
    assert "review queue: 2 open, 0 reviewed, 0 dismissed" in _cli("ops", "review", "list", "--index", index)
    shown = _cli("ops", "review", "show", str(a), "--index", index)
    assert "Who wrote the Acme charter?" in shown and "one_hop 0.60" in shown and "[p1] T:" in shown
    marked = json.loads(_cli("ops", "review", "mark", str(a), "--index", index, "--verdict", "wrong", "--class",
                             "multi_hop", "--note", "two hops", "--json"))
    assert marked["review"] == {**marked["review"], "verdict": "wrong", "true_class": "multi_hop", "note": "two hops"}
    assert json.loads(_cli("ops", "review", "dismiss", str(b), "--index", index, "--json"))["status"] == "dismissed"
    assert "unknown verdict 'ok'" in _cli_error("ops", "review", "mark", str(a), "--index", index, "--verdict", "ok")
    assert "no review item 77" in _cli_error("ops", "review", "show", "77", "--index", index)
    assert "[review] enabled = true" in _cli_error("ops", "review", "list", "--index",
                                                   copy_index(built_index, tmp_path / "x"))


def _nll(p_multi: list[float], y: list[int]) -> float:
    return -sum(math.log(p if t else 1 - p) for p, t in zip(p_multi, y, strict=True)) / len(y)


def _route_p_multi(index: Path, questions: list[str]) -> tuple[list[float], list[float]]:
    """(p(multi_hop) among the retrieval classes, the routing alpha) of each question, as routing sees it."""
    with Engine.open(index) as engine:
        cxs = [engine.complexity_of(q, engine.index.encoder.encode_query(q)) for q in questions]
    p = [c.probs["multi_hop"] / (c.probs["one_hop"] + c.probs["multi_hop"]) for c in cxs]
    return p, [c.route_alpha if c.route_alpha is not None else c.alpha for c in cxs]


@pytest.mark.slow
def test_reviews_round_trip_into_a_recalibrated_classifier(built_index, tmp_path, shared_data) -> None:
    index = copy_index(built_index, tmp_path / "index")
    questions: list[tuple[str, str]] = []
    for name, hop in (("honesty_hq_dev.jsonl", "multi_hop"), ("honesty_nq_test.jsonl", "one_hop")):
        lines = (shared_data / "question_lists" / name).read_text("utf-8").splitlines()[:30]
        questions += [(json.loads(line)["question"], hop) for line in lines]
    service = _service(index, api_keys=[KEY])
    try:
        for q, _ in questions:  # real answers, flagged by the audit, queued by the service
            service.ask(q, "full")
        service.flush_review()
        client = TestClient(create_app(service, warm=False), base_url="http://localhost")
        auth = {"X-API-Key": KEY}
        items = {i["query"]: i["id"] for i in client.get("/v1/review?limit=100", headers=auth).json()["items"]}
        labelled = [(q, hop) for q, hop in questions if q in items]
        assert len(labelled) >= 55, len(labelled)  # nonsense answers: (nearly) all flagged
        for q, hop in labelled[:20]:
            r = client.post(f"/v1/review/{items[q]}", headers=auth, json={"verdict": "wrong", "true_class": hop})
            assert r.status_code == 200, r.text
    finally:
        service.close()
    few = _cli_error("train", "classifier", "calibrate", "--index", index, "--reviews")
    assert "20 from reviews" in few and "30 more are needed" in few, few
    assert "hop_temperature" not in (index / "config.toml").read_text("utf-8") or \
        "hop_temperature = 0.0" in (index / "config.toml").read_text("utf-8")
    with open_review_queue(index) as q:
        for q_text, hop in labelled[20:]:
            q.mark(items[q_text], "wrong", hop)
        q.mark(items[labelled[0][0]], "right", "zero_hop")  # no retrieval: not a hop label
    reviewed = [(q, hop) for q, hop in labelled[1:]]
    texts, y = [q for q, _ in reviewed], [int(h == "multi_hop") for _, h in reviewed]
    before, alpha_before = _route_p_multi(index, texts)

    result = json.loads(_cli("train", "classifier", "calibrate", "--index", index, "--reviews", "--json", "-q"))
    assert result["questions"] == result["from_reviews"] == len(reviewed)
    assert result["hop_temperature"] > 0
    assert f"hop_temperature = {result['hop_temperature']}" in (index / "config.toml").read_text("utf-8")
    after, alpha_after = _route_p_multi(index, texts)
    # routing now acts on the recalibrated confidences: p(multi_hop) is the hop head's logit at the fitted
    # temperature, the alphas moved, and they fit the reviewed labels at least as well (in sample)
    from amsrag.classify.features import features_batch
    from amsrag.classify.model import ComplexityClassifier

    with Engine.open(index) as engine:
        vectors = engine.index.encoder.encode(texts)
    logits = ComplexityClassifier.load().hop.logits(vectors, features_batch(texts))
    temperature = result["hop_temperature"]
    assert after == pytest.approx([1 / (1 + math.exp(-z / temperature)) for z in logits], abs=1e-5)
    assert sum(abs(a - b) > 1e-4 for a, b in zip(alpha_before, alpha_after, strict=True)) >= len(texts) // 2
    assert _nll(after, y) <= _nll(before, y)

    learned = json.loads(_cli("train", "route", "learn", "--index", index, "--reviews", "--json", "-q"))
    assert learned["source"] == "review" and learned["received"] == len(reviewed) and learned["added"] == len(reviewed)
    assert learned["counts"]["multi_hop"] == sum(y) and learned["counts"]["one_hop"] == len(y) - sum(y)
