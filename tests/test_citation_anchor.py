"""A Markdown section's anchor (its GitHub slug) reaches every client the same way: the Python API's `Citation`,
the MCP tools' `search`/`ask`/`get_passage` outputs (the MCP SDK's own client, in-process) and the HTTP API's
`citation` (whose `url` ends in `#anchor`), over the shared real index of tests/fixtures/api_docs (issue 38)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from starlette.testclient import TestClient

from amsrag.config import ServeConfig
from amsrag.mcp.server import build_server
from amsrag.pipeline import Engine
from amsrag.serve import Service, create_app
from amsrag.serve.sources import SourceRoots
from api_index import QUESTIONS

MOON = QUESTIONS[0]  # answered from apollo.md's "## The landing"
FIELDS = ("source", "page", "section", "anchor")


def _fields(d: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(d.get(k) for k in FIELDS)


def test_the_anchor_is_the_same_through_python_mcp_and_http(api_index, api_index_dir: Path) -> None:
    cited = api_index.citations(api_index.ask(MOON))
    assert cited[0].section == "The landing" and cited[0].anchor == "the-landing"
    by_id = {c.id: c for c in cited + api_index.passages(api_index.retrieve(MOON, k=3))}
    python = {pid: (c.source, c.page, c.section, c.anchor) for pid, c in by_id.items()}

    server = build_server(api_index, ServeConfig())

    async def session() -> list[Any]:
        async with Client(server) as client:
            return [await client.call_tool(name, args) for name, args in (
                ("ask", {"question": MOON}), ("search", {"query": MOON, "k": 3}),
                ("get_passage", {"id": cited[0].id}))]

    ask, search, passage = (r.structured_content for r in anyio.run(session))
    assert [_fields(c) for c in ask["citations"]] == [python[c["id"]] for c in ask["citations"]]
    assert [_fields(p) for p in search["passages"]] == [python[p["id"]] for p in search["passages"]]
    assert _fields(passage) == python[cited[0].id] and passage["anchor"] == "the-landing"

    sources = SourceRoots.parse([f"docs={api_index_dir.parent / 'docs'}"])
    service = Service(Engine.open(api_index_dir), ServeConfig(), sources=sources)
    try:
        client = TestClient(create_app(service, warm=False), base_url="http://localhost")
        asked = client.post("/v1/ask", json={"question": MOON}).json()
        found = client.post("/v1/retrieve", json={"query": MOON, "k": 3}).json()
        stored = client.get(f"/v1/documents/{cited[0].id.replace('#', '%23')}").json()
    finally:
        service.close()
    http = [p for p in asked["sources"] + found["passages"]] + [stored]
    assert [_fields(p["citation"]) for p in http] == [python[p["id"]] for p in http]
    landing = asked["sources"][0]["citation"]
    assert landing["url"] == "/v1/sources/docs/apollo.md#the-landing"
