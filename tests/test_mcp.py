"""`amsrag serve --mcp` with the MCP SDK's own client against a small real index: in-process, over stdio (the CLI as a
subprocess) and over streamable HTTP (API keys as the HTTP service's)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from typer.testing import CliRunner

from amsrag.cli.main import app
from amsrag.config import ServeConfig
from amsrag.mcp.server import build_server
from api_index import QUESTIONS

SRC = str(Path(__file__).resolve().parents[1] / "src")
KEY = "k" * 24
TWO_PART = "Who was the first person to walk on the Moon, and which ship recovered the Apollo 11 crew?"


def run(coro_fn, *args: Any) -> Any:
    return anyio.run(coro_fn, *args)


async def tools_and_calls(client: Client, calls: list[tuple[str, dict[str, Any]]]) -> tuple[dict, list]:
    tools = {t.name: t for t in (await client.list_tools()).tools}
    return tools, [await client.call_tool(name, args) for name, args in calls]


def test_tools_in_process_equal_the_engine_and_the_cli(api_index, api_index_dir: Path) -> None:
    server = build_server(api_index, ServeConfig(max_question_chars=300, max_k=20))
    stored = api_index.retrieve(QUESTIONS[1], k=3).passages[0].id
    calls = [("search", {"query": QUESTIONS[1], "k": 3}), ("ask", {"question": QUESTIONS[0]}),
             ("search", {"query": QUESTIONS[2]}),
             ("get_passage", {"id": stored}), ("get_passage", {"id": "no/such#0"}),
             ("search", {"query": "x" * 301}), ("search", {"query": QUESTIONS[1], "k": 21}),
             ("ask", {"question": QUESTIONS[0], "system": "nope"}),
             ("ask", {"question": TWO_PART})]

    async def session() -> tuple[dict, list]:
        async with Client(server) as client:
            return await tools_and_calls(client, calls)

    tools, (search, ask, routed_k, passage, missing, too_long, too_many, bad_system, two) = run(session)
    assert set(tools) == {"search", "ask", "get_passage"}
    schema = tools["search"].input_schema["properties"]
    k_bounds = [branch.get("maximum") for branch in schema["k"].get("anyOf", [schema["k"]])]
    assert schema["query"]["maxLength"] == 300 and 20 in k_bounds
    assert tools["ask"].input_schema["required"] == ["question"] and tools["ask"].output_schema is not None

    expected = api_index.retrieve(QUESTIONS[1], k=3)
    got = search.structured_content
    assert [(p["id"], p["score"], p["rank"]) for p in got["passages"]] == [
        (p.id, p.score, i) for i, p in enumerate(expected.passages, 1)]
    assert got["route"]["strategy"] == expected.trace.strategy
    assert got["passages"][0]["source"].endswith("observatory.md")
    assert [p["id"] for p in routed_k.structured_content["passages"]] == [
        p.id for p in api_index.retrieve(QUESTIONS[2]).passages]

    cli = CliRunner().invoke(app, ["ask", QUESTIONS[0], "--index", str(api_index_dir), "--json", "--no-log"])
    assert cli.exit_code == 0, cli.output
    from_cli = json.loads(cli.stdout.strip().splitlines()[-1])
    answered = ask.structured_content
    assert (answered["answer"], [c["id"] for c in answered["citations"]]) == (from_cli["answer"],
                                                                             from_cli["citations"])
    assert answered["route"]["strategy"] == from_cli["trace"]["strategy"]
    assert answered["citations"][0]["section"] == "The landing"

    assert passage.structured_content["id"] == stored and passage.structured_content["metadata"]["source"]
    assert missing.is_error and "no passage with id 'no/such#0'" in missing.content[0].text
    assert too_long.is_error and too_many.is_error
    assert bad_system.is_error and "unknown system 'nope'" in bad_system.content[0].text

    both = api_index.ask(TWO_PART)  # a question asking two things: each part as the engine answers it
    parts = two.structured_content["parts"]
    assert [(p["question"], p["answer"], p["citations"]) for p in parts] == [
        (p.query, p.answer, p.citations) for p in both.parts] and len(parts) == 2
    assert ask.structured_content["parts"] == []


def test_where_filters_every_tool_as_the_http_api_does(api_index) -> None:
    server = build_server(api_index, ServeConfig(max_question_chars=300, max_k=20))
    tides = {"source": ["tides.md"]}
    moon = api_index.retrieve(QUESTIONS[0], k=3).passages[0].id  # a passage of apollo.md
    calls = [("search", {"query": QUESTIONS[0], "k": 2, "where": tides}),
             ("ask", {"question": QUESTIONS[0], "where": {"doc": "docs/apollo.md"}}),
             ("get_passage", {"id": moon, "where": tides}),
             ("get_passage", {"id": moon, "where": {"type": "markdown"}}),
             ("search", {"query": QUESTIONS[0], "where": {"type": ["pdf"]}}),
             ("search", {"query": QUESTIONS[0], "where": {"type": ["bogus"]}}),
             ("search", {"query": QUESTIONS[0], "where": {"kind": ["x"]}}),
             ("ask", {"question": QUESTIONS[0], "where": {"modified": {"gte": "2025-02-30"}}}),
             ("search", {"query": QUESTIONS[0], "where": {}})]

    async def session() -> tuple[dict, list]:
        async with Client(server) as client:
            return await tools_and_calls(client, calls)

    tools, (search, ask, outside, inside, no_pdf, bad_type, bad_field, bad_date, empty) = run(session)
    for name in ("search", "ask", "get_passage"):
        where = tools[name].input_schema["properties"]["where"]
        assert where.get("default") is None and "where" not in tools[name].input_schema.get("required", [])
    schema = tools["search"].input_schema["$defs"]["WhereIn"]
    assert set(schema["properties"]) == {"source", "type", "doc", "tag", "modified"}
    assert schema["additionalProperties"] is False

    expected = api_index.retrieve(QUESTIONS[0], k=2, where=tides)
    got = search.structured_content["passages"]
    assert [p["id"] for p in got] == [p.id for p in expected.passages] and len(got) == 2
    assert {p["source"] for p in got} == {"tides.md"}  # a filtered top-k still holds k passages (tides.md has 2)
    assert ask.structured_content["citations"] and {c["source"] for c in ask.structured_content["citations"]} == {
        "apollo.md"}
    assert outside.is_error and f"passage {moon!r} is outside the filter" in outside.content[0].text
    assert not inside.is_error and inside.structured_content["id"] == moon
    assert no_pdf.structured_content["passages"] == []
    assert bad_type.is_error and "unknown type 'bogus'" in bad_type.content[0].text
    assert bad_field.is_error and "where.kind" in bad_field.content[0].text
    assert bad_date.is_error and "'2025-02-30' is not a date" in bad_date.content[0].text
    unfiltered = api_index.retrieve(QUESTIONS[0])
    assert [p["id"] for p in empty.structured_content["passages"]] == [p.id for p in unfiltered.passages]


def test_stdio_subprocess(api_index_dir: Path) -> None:
    env = {**os.environ, "PYTHONPATH": SRC, "OMP_NUM_THREADS": "1"}
    params = StdioServerParameters(command=sys.executable, env=env,
                                   args=["-m", "amsrag.cli", "serve", "--mcp", "--index", str(api_index_dir)])

    async def session() -> tuple[dict, list]:
        async with Client(params) as client:
            return await tools_and_calls(client, [("search", {"query": QUESTIONS[2], "k": 2})])

    tools, (search,) = run(session)
    assert set(tools) == {"search", "ask", "get_passage"}
    assert not search.is_error and len(search.structured_content["passages"]) == 2
    assert search.structured_content["passages"][0]["source"].endswith("tides.md")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_streamable_http_needs_a_key_when_keys_are_set(api_index_dir: Path, tmp_path: Path) -> None:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": SRC, "OMP_NUM_THREADS": "1", "AMSRAG_API_KEYS": KEY}
    log = (tmp_path / "mcp.log").open("w")
    proc = subprocess.Popen([sys.executable, "-m", "amsrag.cli", "serve", "--mcp", "--index", str(api_index_dir),
                             "--transport", "http", "--port", str(port)], env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        deadline = time.monotonic() + 240  # the CLI's start-up on a loaded 2-core machine
        while True:
            try:
                refused = httpx.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, timeout=5)
                break
            except httpx.TransportError:
                assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "mcp.log").read_text()
                time.sleep(0.3)
        assert refused.status_code == 401 and refused.json()["error"]["code"] == "unauthorized"

        async def session() -> tuple[dict, list]:
            async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {KEY}"}, timeout=60) as http, \
                    Client(streamable_http_client(url, http_client=http)) as client:
                return await tools_and_calls(client, [("get_passage", {"id": "docs/tides.md#0"})])

        tools, (passage,) = run(session)
        assert set(tools) == {"search", "ask", "get_passage"}
        assert passage.structured_content["title"].startswith("Tides")
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def test_http_off_loopback_without_keys_is_refused(api_index_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AMSRAG_API_KEYS", raising=False)
    result = CliRunner().invoke(app, ["serve", "--mcp", "--index", str(api_index_dir), "--transport", "http",
                                      "--host", "0.0.0.0"])
    assert result.exit_code == 2 and "refusing to serve on 0.0.0.0 without API keys" in result.output
    result = CliRunner().invoke(app, ["serve", "--mcp", "--index", str(api_index_dir), "--transport", "sse"])
    assert result.exit_code == 2 and "--transport must be stdio or http" in result.output
