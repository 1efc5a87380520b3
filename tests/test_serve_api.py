"""The HTTP API against a live uvicorn server on a loopback port, over a copy of the slice index."""

from __future__ import annotations

import json
import shutil
import threading
import time
from pathlib import Path

import httpx
import pytest

from amsrag.access.settings import serve_config
from amsrag.config import ServeConfig
from amsrag.errors import InputError
from amsrag.pipeline import Engine
from amsrag.serve import Service, create_app
from amsrag.serve.background import BackgroundServer

KEY = "test-key-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {KEY}"}
TRACE_KEYS = {"complexity", "strategy", "retrievers", "retriever_calls", "fusion", "corrective", "escalations",
              "generator", "timings_ms"}


def copy_index(built_index, dest: Path) -> Path:
    """A private copy of the session index (the shared one must never be written)."""
    shutil.copytree(built_index.path, dest, ignore=shutil.ignore_patterns("*-shm", ".write.lock"))
    return dest


def start_server(index_dir: Path, **limits) -> tuple[BackgroundServer, Service]:
    service = Service(Engine.open(index_dir), ServeConfig(api_keys=[KEY], **limits))
    server = BackgroundServer(create_app(service))
    server.start()
    return server, service


@pytest.fixture(scope="module")
def served_dir(built_index, tmp_path_factory) -> Path:
    return copy_index(built_index, tmp_path_factory.mktemp("serve") / "index")


@pytest.fixture(scope="module")
def live(served_dir):
    server, service = start_server(served_dir, max_body_bytes=256 * 1024, job_threshold=4)
    with httpx.Client(base_url=server.url, headers=AUTH, timeout=60) as client:
        yield client, service
    server.stop()
    service.close()


def error_of(r: httpx.Response, status: int, code: str) -> str:
    assert r.status_code == status, r.text
    body = r.json()
    assert set(body) == {"error"} and body["error"]["code"] == code, body
    assert body["error"]["message"]
    return body["error"]["message"]


# ---------------------------------------------------------------------------- queries
def test_retrieve_matches_the_engine(live, built_index, slice_questions) -> None:
    client, _ = live
    q = slice_questions[0].question
    r = client.post("/v1/retrieve", json={"query": q, "k": 3})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["query"] == q and len(body["passages"]) == 3
    assert all(set(p) == {"id", "title", "text", "score", "citation"} for p in body["passages"])
    assert all(p["citation"] is None for p in body["passages"])  # data-set passages: no file to cite
    assert set(body["trace"]) >= TRACE_KEYS
    direct = Engine(built_index).retrieve(q, k=3)  # the same index, in process: the same route and passages
    assert [p["id"] for p in body["passages"]] == [p.id for p in direct.passages]
    assert body["trace"]["strategy"] == direct.trace["strategy"]


def test_ask_answers_with_cited_sources(live, slice_questions) -> None:
    client, _ = live
    q = slice_questions[1].question
    body = client.post("/v1/ask", json={"question": q, "explain": True}).json()
    assert body["query"] == q and body["answer"] and isinstance(body["abstained"], bool)
    assert set(body["trace"]) >= TRACE_KEYS
    assert [s["id"] for s in body["sources"]] == body["citations"]
    hit_ids = {h["id"] for r in body["trace"]["retrievers"] for h in r["hits"]}
    assert hit_ids and hit_ids <= set(body["titles"])
    for s in body["sources"]:
        doc = client.get(f"/v1/documents/{s['id']}").json()
        assert doc["text"] == s["text"] and doc["title"] == s["title"]


@pytest.mark.parametrize(("payload", "status", "code"), [
    ({}, 422, "invalid_request"),
    ({"query": "a", "question": "b"}, 422, "invalid_request"),
    ({"query": "   "}, 422, "invalid_request"),
    ({"query": "x" * 2001}, 422, "question_too_long"),
    ({"query": "who?", "k": 1000}, 422, "k_too_large"),
    ({"query": "who?", "k": 0}, 422, "invalid_request"),
    ({"query": "who?", "system": "nope"}, 400, "invalid_input"),
    ({"query": "who?", "index": "/etc"}, 422, "invalid_request"),  # no file-system paths from clients
])
def test_bad_queries_are_json_errors(live, payload, status, code) -> None:
    client, _ = live
    error_of(client.post("/v1/retrieve", json=payload), status, code)


def test_malformed_json_unknown_route_and_method(live) -> None:
    client, _ = live
    error_of(client.post("/v1/ask", content=b"{not json", headers={"Content-Type": "application/json"}),
             422, "invalid_request")
    error_of(client.get("/v1/nowhere"), 404, "not_found")
    error_of(client.get("/v1/ask"), 405, "method_not_allowed")


def test_body_size_limit(live) -> None:
    client, _ = live
    big = {"passages": [{"text": "word " * 60_000}]}
    assert "262144 bytes" in error_of(client.post("/v1/documents", json=big), 413, "body_too_large")

    def chunks():  # no content-length: the limit still holds
        for _ in range(100):
            yield b" " * 4096

    error_of(client.post("/v1/ask", content=chunks(), headers={"Content-Type": "application/json"}),
             413, "body_too_large")


# ---------------------------------------------------------------------------- auth, CORS
def test_api_keys(live) -> None:
    client, _ = live
    bare = httpx.Client(base_url=str(client.base_url), timeout=30)
    error_of(bare.post("/v1/retrieve", json={"query": "who?"}), 401, "unauthorized")
    error_of(bare.post("/v1/retrieve", json={"query": "who?"}, headers={"Authorization": "Bearer wrong"}),
             401, "unauthorized")
    error_of(bare.get("/metrics"), 401, "unauthorized")
    assert bare.post("/v1/retrieve", json={"query": "who?"}, headers={"X-API-Key": KEY}).status_code == 200
    assert bare.get("/healthz").json()["status"] == "ok"  # liveness and the UI page need no key
    assert "ask-form" in bare.get("/").text


def test_favicon_needs_no_key(live) -> None:
    client, _ = live
    bare = httpx.Client(base_url=str(client.base_url), timeout=30)
    r = bare.get("/favicon.ico")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("image/svg+xml")
    assert r.text.startswith("<svg") and "</svg>" in r.text
    assert 'rel="icon" href="/favicon.ico"' in bare.get("/").text


def test_cors_off_by_default(live) -> None:
    client, _ = live
    r = client.options("/v1/ask", headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"})
    assert "access-control-allow-origin" not in r.headers
    r = client.get("/healthz", headers={"Origin": "https://evil.example"})
    assert "access-control-allow-origin" not in r.headers


def test_serve_config_refuses_open_servers_without_keys() -> None:
    with pytest.raises(InputError, match="AMSRAG_API_KEYS"):
        serve_config(ServeConfig(), host="0.0.0.0", env={})
    assert serve_config(ServeConfig(), host="0.0.0.0", env={"AMSRAG_API_KEYS": f"{KEY}, {KEY}x"}).api_keys == [
        KEY, KEY + "x"]
    assert serve_config(ServeConfig(), host="127.0.0.1", env={}).api_keys == []
    assert serve_config(ServeConfig(), host="::1", env={}).host == "::1"
    with pytest.raises(InputError, match="16 characters"):
        serve_config(ServeConfig(), env={"AMSRAG_API_KEYS": "short"})


# ---------------------------------------------------------------------------- documents and jobs
def test_add_get_find_delete_document(live) -> None:
    client, service = live
    before = client.get("/healthz").json()["passages"]
    docs = [{"id": "serve-test-1", "title": "Zorbulax Quintessa",
             "text": "Zorbulax Quintessa is a fictional lighthouse keeper on the island of Vemmerholt."},
            {"id": "serve-test-2", "title": "Vemmerholt", "text": "Vemmerholt is a small island with one lighthouse."}]
    r = client.post("/v1/documents", json={"passages": docs})
    assert r.status_code == 200, r.text
    assert r.json()["added"] == 2 and r.json()["passages"] == before + 2
    assert client.get("/v1/documents/serve-test-1").json()["title"] == "Zorbulax Quintessa"
    found = client.post("/v1/retrieve", json={"query": "Who keeps the lighthouse on Vemmerholt, Zorbulax?",
                                              "system": "bm25", "k": 3}).json()
    assert "serve-test-1" in [p["id"] for p in found["passages"]]
    assert client.post("/v1/documents", json={"passages": docs}).json()["skipped_existing"] == 2
    assert client.delete("/v1/documents/serve-test-1").json()["deleted"] == 1
    assert client.delete("/v1/documents/serve-test-2").json()["passages"] == before
    error_of(client.get("/v1/documents/serve-test-1"), 404, "not_found")
    error_of(client.delete("/v1/documents/serve-test-1"), 404, "not_found")
    assert service.engine.index.get("serve-test-2") is None


def test_put_replaces_a_whole_document(live) -> None:
    client, service = live
    before = client.get("/healthz").json()["passages"]
    doc = "/v1/documents/handbook/[ops]/oncall.md"
    text = ("# On-call\n\nThe pager rotates every Monday at 09:00.\n\n## Escalation\n\n"
            "Page the Vemmerholt duty lead after 15 minutes without an answer.\n")
    r = client.put(doc, json={"text": text, "format": "markdown"})
    assert r.status_code == 200, r.text
    assert (r.json()["created"], r.json()["added"], r.json()["passages"]) == (True, 2, before + 2)
    assert client.get("/v1/documents/handbook/[ops]/oncall.md%231").json()["title"] == "On-call › Escalation"
    same = client.put(doc, json={"text": text, "format": "markdown"}).json()
    assert (same["unchanged"], same["added"], same["embedded"]) == (True, 0, 0)
    edited = client.put(doc, json={"text": text.replace("15 minutes", "10 minutes"), "format": "markdown"}).json()
    assert (edited["created"], edited["kept"], edited["removed"], edited["added"]) == (False, 1, 1, 1)
    assert "10 minutes" in client.get("/v1/documents/handbook/[ops]/oncall.md%231").json()["text"]
    explicit = client.put(doc, json={"passages": [{"text": "Only one passage now.", "title": "On-call"}]}).json()
    assert (explicit["removed"], explicit["added"], explicit["passages"]) == (2, 1, before + 1)
    assert service.engine.index.get("handbook/[ops]/oncall.md#0").text == "Only one passage now."
    error_of(client.put(doc, json={}), 400, "invalid_input")
    error_of(client.put(doc, json={"text": "\x00\x00 \x01"}), 400, "invalid_input")
    error_of(client.put(doc, json={"text": "a", "passages": [{"text": "b"}]}), 400, "invalid_input")
    gone = client.delete(doc, params={"document": "true"}).json()
    assert (gone["deleted"], gone["passages"]) == (1, before)
    error_of(client.delete(doc, params={"document": "true"}), 404, "not_found")


def test_invalid_documents_add_nothing(live) -> None:
    client, _ = live
    bad = {"passages": [{"id": "ok-1", "text": "A valid passage."}, {"id": "bad-1", "title": "no text"}]}
    assert "passages[1]" in error_of(client.post("/v1/documents", json=bad), 400, "invalid_input")
    dup = {"passages": [{"id": "d", "text": "one"}, {"id": "d", "text": "two"}]}
    assert "duplicate" in error_of(client.post("/v1/documents", json=dup), 400, "invalid_input")
    error_of(client.post("/v1/documents", json={"passages": []}), 400, "invalid_input")
    error_of(client.post("/v1/documents", json={"passages": ["just a string"]}), 400, "invalid_input")
    error_of(client.get("/v1/documents/ok-1"), 404, "not_found")


def wait_job(client: httpx.Client, url: str) -> dict:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        job = client.get(url).json()
        if job["status"] in ("succeeded", "failed"):
            return job
        time.sleep(0.1)
    raise AssertionError(f"job {url} did not finish")


def test_large_batches_run_as_jobs(live) -> None:
    client, _ = live
    docs = [{"id": f"job-{i}", "title": f"Job passage {i}", "text": f"Passage number {i} about quokka migration."}
            for i in range(6)]  # above the test job threshold of 4
    r = client.post("/v1/documents", json={"passages": docs})
    assert r.status_code == 202, r.text
    assert r.headers["location"] == r.json()["status_url"]
    job = wait_job(client, r.headers["location"])
    assert job["status"] == "succeeded" and job["result"]["added"] == 6, job
    step = job["progress"]  # the last step of the write, with its counts, rate and ETA
    assert step["state"] == "done" and step["done"] == step["total"] and step["eta_s"] == 0.0, job
    assert set(step) == {"task", "state", "done", "total", "rate", "eta_s", "elapsed_s"}
    assert client.get("/v1/documents/job-5").status_code == 200
    # a job whose write fails reports why; nothing of it is stored
    clash = [{"id": "job-0", "text": "different content under an existing id"}]
    r = client.post("/v1/documents", json={"passages": clash, "background": True})
    job = wait_job(client, r.json()["status_url"])
    assert job["status"] == "failed" and job["error"]["code"] == "invalid_input" and "job-0" in job["error"]["message"]
    error_of(client.get("/v1/jobs/does-not-exist"), 404, "not_found")
    for i in range(6):
        assert client.delete(f"/v1/documents/job-{i}").status_code == 200


@pytest.mark.slow
def test_reads_during_writes_stay_consistent(live, slice_questions) -> None:
    """Queries run while passages are added and deleted: every query succeeds and returns stored passages."""
    client, _ = live
    failures: list[str] = []
    stop = threading.Event()

    def reader(n: int) -> None:
        with httpx.Client(base_url=str(client.base_url), headers=AUTH, timeout=60) as c:
            i = n
            while not stop.is_set():
                r = c.post("/v1/retrieve", json={"query": slice_questions[i % len(slice_questions)].question})
                if r.status_code != 200 or not r.json()["passages"]:
                    failures.append(r.text)
                i += 1

    threads = [threading.Thread(target=reader, args=(n,)) for n in range(3)]
    for t in threads:
        t.start()
    try:
        for round_ in range(3):
            docs = [{"id": f"rw-{round_}-{i}", "text": f"Concurrent write {round_} passage {i} on otters."}
                    for i in range(3)]
            assert client.post("/v1/documents", json={"passages": docs}).status_code == 200
            for d in docs:
                assert client.delete(f"/v1/documents/{d['id']}").status_code == 200
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert not failures, failures[:3]


# ---------------------------------------------------------------------------- the query library
def test_query_library_learns_relabels_and_counts(live, served_dir) -> None:
    from amsrag.classify.library import LibrarySettings
    from amsrag.store import EmbeddedIndex

    client, _ = live
    before = client.get("/v1/route/library").json()["size"]
    jaws, tulsa = "Who wrote the novel that the film Jaws is based on?", "Where is Tulsa?"
    r = client.post("/v1/route/library", json={"queries": [{"question": jaws, "hop": "multi_hop"},
                                                           {"question": tulsa, "hop": "one_hop"}],
                                               "source": "serve-test"})
    assert r.status_code == 200, r.text
    assert r.json() == {"received": 2, "added": 2, "relabelled": 0, "unchanged": 0, "size": before + 2,
                        "counts": {"one_hop": 1, "multi_hop": 1, "source:serve-test": 2}}
    again = client.post("/v1/route/library", json={"queries": [{"question": "where is TULSA", "hop": "multi_hop"},
                                                               {"question": jaws, "hop": "multi_hop"}]}).json()
    assert (again["added"], again["relabelled"], again["unchanged"]) == (0, 1, 1)  # source defaults to "api"
    assert client.get("/v1/route/library").json() == {
        "size": before + 2, "counts": {"one_hop": 0, "multi_hop": 2, "source:api": 1, "source:serve-test": 1}}
    with EmbeddedIndex.open(served_dir) as other:  # saved in the index, where the engine's classifier reads it
        library = other.query_library()
        assert library.hop_of(tulsa) == "multi_hop" and library.sources == ["serve-test", "api"]
        vote = library.vote(other.encoder.encode_query(tulsa), LibrarySettings())
        assert vote is not None and vote.neighbours[0][:2] == ("where is TULSA", "multi_hop")


def test_query_library_refuses_bad_requests(live) -> None:
    client, _ = live
    before = client.get("/v1/route/library").json()
    bare = httpx.Client(base_url=str(client.base_url), timeout=30)
    one = {"queries": [{"question": "Who?", "hop": "one_hop"}]}
    error_of(bare.post("/v1/route/library", json=one), 401, "unauthorized")
    error_of(bare.get("/v1/route/library"), 401, "unauthorized")
    message = error_of(client.post("/v1/route/library", json={"queries": [
        {"question": "A fine question?", "hop": "one_hop"}, {"question": "A bad one?", "hop": "zero_hop"}]}),
        400, "invalid_input")
    assert "queries[1]" in message and "'zero_hop'" in message and "A bad one?" in message
    assert "empty" in error_of(client.post("/v1/route/library", json={"queries": []}), 400, "invalid_input")
    error_of(client.post("/v1/route/library", json={"queries": [{"question": " ?", "hop": "one_hop"}]}),
             400, "invalid_input")
    error_of(client.post("/v1/route/library", json={**one, "source": "  "}), 400, "invalid_input")
    error_of(client.post("/v1/route/library", json={"queries": [{"question": "Who?"}]}), 422, "invalid_request")
    error_of(client.post("/v1/route/library", json={"queries": [{"question": "Who?", "hop": "one_hop", "x": 1}]}),
             422, "invalid_request")
    error_of(client.post("/v1/route/library", json={"queries": "Who?"}), 422, "invalid_request")
    assert client.get("/v1/route/library").json() == before


# ---------------------------------------------------------------------------- OpenAI compatibility
def test_models_and_chat_completion(live, slice_questions) -> None:
    client, _ = live
    ids = [m["id"] for m in client.get("/v1/models").json()["data"]]
    assert "amsrag" in ids and "amsrag-bm25" in ids
    q = slice_questions[2].question
    asked = client.post("/v1/ask", json={"question": q}).json()
    body = client.post("/v1/chat/completions", json={
        "model": "amsrag", "temperature": 0,
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "earlier question"},
                     {"role": "assistant", "content": "earlier answer"}, {"role": "user", "content": q}]}).json()
    assert body["object"] == "chat.completion"
    content = body["choices"][0]["message"]["content"]
    assert content.startswith(asked["answer"])
    assert [c["id"] for c in body["citations"]] == asked["citations"]
    if asked["citations"]:
        assert "[1]" in content and "Sources:" in content and asked["citations"][0] in content
    assert body["amsrag"]["trace"]["strategy"] == asked["trace"]["strategy"]
    error_of(client.post("/v1/chat/completions", json={"model": "gpt-4", "messages": [{"role": "user", "content": q}]}),
             404, "model_not_found")
    error_of(client.post("/v1/chat/completions", json={"messages": [{"role": "system", "content": "hi"}]}),
             422, "invalid_request")


def test_chat_completion_streams(live, slice_questions) -> None:
    client, _ = live
    messages = [{"role": "user", "content": [{"type": "text", "text": slice_questions[3].question}]}]
    whole = client.post("/v1/chat/completions", json={"model": "amsrag", "messages": messages}).json()
    events = []
    with client.stream("POST", "/v1/chat/completions",
                       json={"model": "amsrag", "messages": messages, "stream": True}) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        for line in r.iter_lines():
            if line.startswith("data: "):
                events.append(line[6:])
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)
    assert text == whole["choices"][0]["message"]["content"]
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-1]["citations"] == whole["citations"]


# ---------------------------------------------------------------------------- metrics
def test_metrics_reflect_traffic(live, slice_questions) -> None:
    client, _ = live
    client.post("/v1/retrieve", json={"query": slice_questions[4].question})
    httpx.get(f"{client.base_url}/v1/config")  # a 401
    client.post("/v1/ask", content=b" " * 300_000, headers={"Content-Type": "application/json"})  # a 413
    text = client.get("/metrics").text
    assert 'amsrag_http_requests_total{method="POST",route="/v1/retrieve",status="200"}' in text
    assert 'amsrag_stage_duration_seconds_bucket{le="0.001",stage="embed"}' in text
    assert 'stage="retrieve.dense"' in text and 'stage="total"' in text
    assert 'amsrag_route_total{label=' in text and 'system="full"' in text
    assert 'amsrag_errors_total{code="unauthorized"}' in text
    assert "amsrag_index_passages 90.0" in text
    assert 'amsrag_errors_total{code="body_too_large"}' in text


def test_config_exposes_router_thresholds(live, built_index) -> None:
    client, _ = live
    cfg = client.get("/v1/config").json()
    assert cfg["router"] == {"theta_low": built_index.config.router.theta_low,
                             "theta_high": built_index.config.router.theta_high}
    assert "full" in cfg["systems"] and cfg["limits"]["max_question_chars"] == 2000
    assert "/" not in json.dumps(cfg["index"])  # no server paths leak


# ---------------------------------------------------------------------------- overload and timeouts
@pytest.mark.slow
def test_overload_is_429_and_slow_requests_504(served_dir) -> None:
    """One slot, no queue, 1.5 s budget. A held write lock stalls the first query (real blocking, no fake)."""
    server, service = start_server(served_dir, max_running=1, max_queued=0, request_timeout_s=1.5)
    try:
        with httpx.Client(base_url=server.url, headers=AUTH, timeout=30) as client:
            results: dict[str, httpx.Response] = {}
            with service.lock.write():
                first = threading.Thread(target=lambda: results.setdefault(
                    "first", client.post("/v1/retrieve", json={"query": "who?"})))
                first.start()
                deadline = time.monotonic() + 10
                while service.metrics.active.labels("retrieve")._value.get() < 1 and time.monotonic() < deadline:
                    time.sleep(0.01)
                r = client.post("/v1/retrieve", json={"query": "who else?"})
                error_of(r, 429, "overloaded")
                assert r.headers["retry-after"] == "1"
                first.join()
            error_of(results["first"], 504, "timeout")
            deadline = time.monotonic() + 10  # the abandoned call ends once the lock is free; then the slot is too
            while service.metrics.active.labels("retrieve")._value.get() > 0 and time.monotonic() < deadline:
                time.sleep(0.01)
            assert client.post("/v1/retrieve", json={"query": "who?"}).status_code == 200
            text = client.get("/metrics").text
            assert 'amsrag_errors_total{code="overloaded"} 1.0' in text
            assert 'amsrag_errors_total{code="timeout"} 1.0' in text
    finally:
        server.stop()
        service.close()


def test_writes_by_another_process_are_picked_up(live, served_dir) -> None:
    """`amsrag index add` on the served directory while the server runs: the server reloads within seconds."""
    from amsrag.store import EmbeddedIndex
    from amsrag.types import Passage

    client, _ = live
    before = client.get("/healthz").json()["passages"]
    with EmbeddedIndex.open(served_dir) as other:  # a second handle: its own lock fd and SQLite connection
        other.add([Passage.make("Outside writers add passages like this one about narwhals.", "Narwhal note",
                                id="outside-1")])
    deadline = time.monotonic() + 20
    while client.get("/healthz").json()["passages"] != before + 1:  # the server's in-memory view
        assert time.monotonic() < deadline, "the server never saw the outside write"
        time.sleep(0.2)
    found = client.post("/v1/retrieve", json={"query": "narwhals outside writers", "system": "bm25", "k": 3}).json()
    assert found["passages"][0]["id"] == "outside-1"
    assert client.delete("/v1/documents/outside-1").status_code == 200


# ---------------------------------------------------------------------------- the command line
def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_cli_serve(served_dir, tmp_path) -> None:
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "AMSRAG_API_KEYS"}
    refused = subprocess.run([sys.executable, "-m", "amsrag.cli", "serve", "--index", str(served_dir),
                              "--host", "0.0.0.0"], capture_output=True, text=True, timeout=120, env=env)
    assert refused.returncode == 2 and "AMSRAG_API_KEYS" in refused.stderr, refused.stderr
    missing = subprocess.run([sys.executable, "-m", "amsrag.cli", "serve", "--index", str(tmp_path / "none")],
                             capture_output=True, text=True, timeout=120, env=env)
    assert missing.returncode == 2 and "no index directory" in missing.stderr

    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "amsrag.cli", "serve", "--index", str(served_dir),
                             "--port", str(port)], env={**env, "AMSRAG_API_KEYS": KEY},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, proc.stderr.read()
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "amsrag serve did not start"
            time.sleep(0.2)
        error_of(httpx.post(f"{url}/v1/retrieve", json={"query": "who?"}), 401, "unauthorized")
        r = httpx.post(f"{url}/v1/retrieve", json={"query": "Tinted Windows debut album"}, headers=AUTH, timeout=60)
        assert r.status_code == 200 and r.json()["passages"]
        assert httpx.get(f"{url}/openapi.json").status_code == 401  # the schema needs the key when keys are set
        assert httpx.get(f"{url}/openapi.json", headers=AUTH).json()["paths"]["/v1/ask"]
    finally:
        proc.terminate()
        proc.wait(timeout=30)
