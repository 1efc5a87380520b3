"""The MCP server over one index: tools `search`, `ask` and `get_passage` with typed, bounded inputs (the index's
[serve] limits: question length, k, engine calls at once, seconds per call; `where`: the HTTP API's metadata filter),
over stdio or streamable HTTP. Over
HTTP the service's key rules hold: API keys ($AMSRAG_API_KEYS or [serve] api_keys, Bearer or X-API-Key) and none
needed only on loopback.

No `from __future__ import annotations` here: the SDK evaluates the tools' annotations, which name limits local
to `build_server`."""

from collections.abc import Callable
from typing import Annotated, Any, Literal, TypeVar

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field
from starlette.types import ASGIApp, Receive, Scope, Send

from amsrag.access.errors import ApiError, error_response
from amsrag.access.limits import KeyCheck
from amsrag.access.settings import serve_config
from amsrag.api import Citation, Index, route_of
from amsrag.api.passages import retrieved
from amsrag.config import ServeConfig
from amsrag.errors import AmsragError
from amsrag.filters import Where
from amsrag.mcp.tools import (
    AskOut,
    AskPartOut,
    PassageOut,
    RouteOut,
    ScoredPassageOut,
    SearchOut,
    StoredPassageOut,
    WhereIn,
)
from amsrag.pipeline.systems import SYSTEMS
from amsrag.types import Passage
from amsrag.version import __version__

INSTRUCTIONS = ("Search and question an amsrag index: `search` returns the passages adaptive retrieval finds, "
                "`ask` an extractive answer with its citations and route, `get_passage` a passage by id.")
MAX_ID_CHARS = 512
T = TypeVar("T")


def build_server(index: Index, limits: ServeConfig) -> MCPServer:
    """The MCP server with the three tools over `index`; `limits`: the [serve] section whose question length,
    max_k, max_running and request_timeout_s bound every call."""
    engine = index.engine
    engine.max_question_chars = limits.max_question_chars
    slots = anyio.CapacityLimiter(limits.max_running)
    systems = tuple(SYSTEMS)
    Question = Annotated[str, Field(min_length=1, max_length=limits.max_question_chars,
                                    description="the question, in natural language")]
    System = Annotated[str, Field(json_schema_extra={"enum": list(systems)},
                                  description="the retrieval system (full: adaptive routing)")]
    server = MCPServer("amsrag", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING")

    async def bounded(fn: Callable[..., T], *args: Any) -> T:
        """`fn(*args)` on a worker thread, at most max_running at once, within request_timeout_s."""
        try:
            with anyio.fail_after(limits.request_timeout_s):
                return await anyio.to_thread.run_sync(lambda: fn(*args), limiter=slots, abandon_on_cancel=True)
        except TimeoutError:
            raise ToolError(f"the call took longer than {limits.request_timeout_s} s "
                            f"([serve] request_timeout_s)") from None
        except AmsragError as exc:
            raise ToolError(str(exc)) from None

    def check_system(system: str) -> None:
        if system not in systems:
            raise ToolError(f"unknown system {system!r}; choose from {', '.join(systems)}")

    def scope(where: WhereIn | None) -> Where | None:
        """The filter of a call (None when it filters nothing); a malformed one is the tool's error."""
        if where is None:
            return None
        try:
            return where.parsed() or None
        except AmsragError as exc:
            raise ToolError(str(exc)) from None

    Filter = Annotated[WhereIn | None, Field(description="only passages this metadata filter allows (as the HTTP "
                                                         "API's `where`); fields AND, values OR")]

    @server.tool(description="Passages the index holds for a question, best first, found by adaptive retrieval "
                             "(routing, several retrievers, fusion), with the route taken.")
    async def search(query: Question, k: Annotated[int | None, Field(
            ge=1, le=limits.max_k, description="passages to return (default: the route's own number)")] = None,
                     system: System = "full", where: Filter = None) -> SearchOut:
        check_system(system)
        w = scope(where)
        result = await bounded(lambda: engine.retrieve(query, system, k, where=w))
        passages = [ScoredPassageOut.retrieved(r) for r in retrieved(engine, result)]
        return SearchOut(query=result.query, passages=passages, route=RouteOut.of(route_of(result.trace)))

    @server.tool(description="Answer a question from the index: the answer, the passages it cites (with their "
                             "source, page, section and anchor), whether it abstained, and the route taken.")
    async def ask(question: Question, system: System = "full", where: Filter = None) -> AskOut:
        check_system(system)
        w = scope(where)
        result = await bounded(lambda: engine.ask(question, system, where=w))
        return AskOut(question=result.query, answer=result.answer, abstained=result.abstained,
                      flagged=result.flagged, citations=[PassageOut.of(c) for c in index.citations(result)],
                      route=RouteOut.of(route_of(result.trace)),
                      parts=[AskPartOut(question=p.query, answer=p.answer, abstained=p.abstained, citations=p.citations)
                             for p in result.parts])

    def allowed(passage: Passage, w: Where) -> bool:
        doc = index.engine.index.documents(prefix=passage.doc_id).get(passage.doc_id) if w.reads_documents else None
        return w.matches(passage, doc)

    @server.tool(description="A stored passage by its id (as `search` and `ask` return them), with its metadata; "
                             "with `where`, only when the filter allows it.")
    async def get_passage(id: Annotated[str, Field(min_length=1, max_length=MAX_ID_CHARS)],
                          where: Filter = None) -> StoredPassageOut:
        w = scope(where)
        passage = await bounded(index.passage, id)
        if passage is None:
            raise ToolError(f"no passage with id {id!r} in {index.location}")
        if w is not None and not await bounded(allowed, passage, w):
            raise ToolError(f"passage {id!r} is outside the filter {w.to_dict()}")
        c = Citation.of(passage)
        return StoredPassageOut(id=c.id, title=c.title, text=c.text, source=c.source, page=c.page,
                                section=c.section, anchor=c.anchor, doc_id=passage.doc_id, metadata=passage.metadata)

    return server


class RequireKey:
    """ASGI middleware: every HTTP request carries one of the keys (`Authorization: Bearer KEY` or `X-API-Key`),
    answered 401 otherwise, as the HTTP service does; no keys, no check (allowed on loopback only)."""

    def __init__(self, app: ASGIApp, keys: list[str]) -> None:
        self.app = app
        self.keys = KeyCheck(keys)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self.keys.enabled:
            headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
            try:
                self.keys.check(headers.get("authorization"), headers.get("x-api-key"))
            except ApiError as exc:
                await error_response(exc.status, exc.code, exc.message, exc.headers)(scope, receive, send)
                return
        await self.app(scope, receive, send)


Transport = Literal["stdio", "http"]


def run(index_dir: str, transport: Transport = "stdio", host: str | None = None, port: int | None = None,
        path: str = "/mcp") -> None:
    """Serve the index over `transport` until stopped (stdio: until the client closes the stream)."""
    index = Index.open(index_dir)
    try:
        if transport == "stdio":
            build_server(index, index.engine.config.serve).run("stdio")
            return
        import uvicorn

        cfg = serve_config(index.engine.config.serve, host, port)  # refuses to listen off loopback without keys
        server = build_server(index, cfg)
        app = RequireKey(server.streamable_http_app(streamable_http_path=path, host=cfg.host,
                                                    max_request_body_size=cfg.max_body_bytes), cfg.api_keys)
        uvicorn.run(app, host=cfg.host, port=cfg.port, log_level="warning", timeout_graceful_shutdown=5)
    finally:
        index.close()
