"""Metadata filters on the OpenAI-compatible endpoint (`where`, as OpenAI clients send it in `extra_body`) and on
`amsrag eval --where`, on real indexes: the document fixtures' index of test_filters.py and the slice index."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from test_filters import doc_index  # noqa: F401  (the module's index of the document fixtures)
from test_serve_api import AUTH, KEY, error_of, start_server

QUESTION = "What is the root account password?"


@pytest.fixture(scope="module")
def chat(doc_index: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:  # noqa: F811
    copy = tmp_path_factory.mktemp("chat") / "served"
    shutil.copytree(doc_index, copy, ignore=shutil.ignore_patterns("*-shm", ".write.lock"))
    server, service = start_server(copy)
    try:
        with httpx.Client(base_url=server.url, headers=AUTH, timeout=120) as client:
            yield client
    finally:
        server.stop()
        service.close()


def completion(client: httpx.Client, question: str, **more: object) -> httpx.Response:
    return client.post("/v1/chat/completions", json={"model": "amsrag",
                                                     "messages": [{"role": "user", "content": question}], **more})


def stream_events(client: httpx.Client, question: str, **more: object) -> list[dict]:
    with client.stream("POST", "/v1/chat/completions", json={
            "model": "amsrag", "messages": [{"role": "user", "content": question}], "stream": True, **more}) as r:
        assert r.status_code == 200, r.read()
        events = [line[6:] for line in r.iter_lines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    return [json.loads(e) for e in events[:-1]]


@pytest.mark.parametrize(("question", "where", "allowed"), [
    (QUESTION, {"type": ["pdf"]}, lambda pid: ".pdf#" in pid),
    ("How do I set the build target directory?", {"source": "docs/*", "type": "markdown"},
     lambda pid: pid.startswith("kb/docs/")),
    ("What does the handbook say about styles?", {"doc": ["kb/guides/*.docx"]},
     lambda pid: pid.startswith("kb/guides/") and ".docx#" in pid),
])
def test_chat_completion_keeps_to_the_filter(chat: httpx.Client, question: str, where: dict, allowed) -> None:
    r = completion(chat, question, where=where)
    assert r.status_code == 200, r.text
    body = r.json()
    shown = body["amsrag"]["filter"]
    assert shown == body["amsrag"]["trace"]["filter"] and shown["allowed"] > 0
    assert {k: v if isinstance(v, list) else [v] for k, v in where.items()} == shown["where"]
    cited = [c["id"] for c in body["citations"]]
    assert cited and all(allowed(c) for c in cited), cited
    assert all(allowed(e) for e in body["amsrag"]["trace"]["evidence"])
    # the same answer as /v1/ask with the same filter
    asked = chat.post("/v1/ask", json={"query": question, "where": where}).json()
    assert asked["citations"] == cited and body["choices"][0]["message"]["content"].startswith(asked["answer"])
    # streamed: the final chunk carries the filtered citations and the filter
    chunks = stream_events(chat, question, where=where)
    last = chunks[-1]
    assert [c["id"] for c in last["citations"]] == cited and last["amsrag"]["filter"]["where"] == shown["where"]
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)
    assert text == body["choices"][0]["message"]["content"]


def test_chat_completion_without_a_filter_is_unchanged(chat: httpx.Client) -> None:
    question = "What is a diversion of a package file?"  # answered from the HTML page
    plain = completion(chat, question).json()
    assert "filter" not in plain["amsrag"] and "filter" not in plain["amsrag"]["trace"]
    assert set(plain["amsrag"]) == {"abstained", "trace"}
    assert plain["citations"] and all(".html#" in c["id"] for c in plain["citations"])
    for empty in (None, {}):  # null or {} filters nothing
        same = completion(chat, question, where=empty).json()
        assert same["citations"] == plain["citations"] and "filter" not in same["amsrag"]
        assert same["choices"] == plain["choices"]
    # kept to the PDFs, the page is out of reach: no HTML passage is read or cited
    pdf = completion(chat, question, where={"type": "pdf"}).json()
    assert all(".pdf#" in c["id"] for c in pdf["citations"])
    assert pdf["amsrag"]["trace"]["evidence"] and all(".pdf#" in e for e in pdf["amsrag"]["trace"]["evidence"])


@pytest.mark.parametrize(("where", "message"), [
    ({"colour": ["red"]}, "`where.colour`: unknown field 'colour'"),
    ({"type": ["docs"]}, "unknown type 'docs'"),
    ({"type": []}, "empty value for type"),
    ({"source": [3]}, "must be a string or a list of strings"),
])
def test_chat_completion_refuses_a_bad_filter(chat: httpx.Client, where: dict, message: str) -> None:
    for stream in (False, True):  # refused before the answer, streaming or not
        assert message in error_of(completion(chat, QUESTION, where=where, stream=stream), 400, "invalid_input")


def test_chat_completion_refuses_a_filter_that_is_not_an_object(chat: httpx.Client) -> None:
    message = error_of(completion(chat, QUESTION, where="type=pdf"), 422, "invalid_request")
    assert "where" in message


def test_openai_client_sends_the_filter_in_extra_body(chat: httpx.Client) -> None:
    openai = pytest.importorskip("openai")
    client = openai.OpenAI(base_url=f"{chat.base_url}/v1", api_key=KEY, max_retries=0)
    done = client.chat.completions.create(model="amsrag", messages=[{"role": "user", "content": QUESTION}],
                                          extra_body={"where": {"type": ["pdf"]}})
    extra = done.model_extra or {}
    assert extra["amsrag"]["filter"]["where"] == {"type": ["pdf"]}
    assert extra["citations"] and all(".pdf#" in c["id"] for c in extra["citations"])
    with pytest.raises(openai.BadRequestError, match="unknown field 'kind'"):
        client.chat.completions.create(model="amsrag", messages=[{"role": "user", "content": QUESTION}],
                                       extra_body={"where": {"kind": ["pdf"]}})
