"""`amsrag serve --mcp` (and the old spelling `amsrag mcp`, hidden): the index's tools for MCP clients
(docs/mcp.md)."""

from __future__ import annotations

from typing import Annotated

import typer

from amsrag.cli.common import IndexOpt
from amsrag.errors import InputError


def mcp_command(
    index: IndexOpt,
    transport: Annotated[str, typer.Option("--transport", help="stdio (the client starts this command) or http "
                                                              "(streamable HTTP at --path)")] = "stdio",
    host: Annotated[str | None, typer.Option("--host", help="http: bind address (default 127.0.0.1; elsewhere "
                                                          "API keys are required, as for serve)")] = None,
    port: Annotated[int | None, typer.Option("--port", help="http: TCP port (default [serve] port, 8000)")] = None,
    path: Annotated[str, typer.Option("--path", help="http: the endpoint's path")] = "/mcp",
) -> None:
    """Model Context Protocol server: tools search, ask and get_passage over an index (API keys over http:
    $AMSRAG_API_KEYS)."""
    if transport not in ("stdio", "http"):
        raise InputError(f"--transport must be stdio or http, got {transport!r}")
    try:
        from amsrag.mcp.server import run
    except ImportError as exc:
        raise InputError(f"amsrag serve --mcp needs the MCP SDK ({exc.name} is missing): "
                         "pip install 'amsrag[mcp]'") from exc
    run(index, "stdio" if transport == "stdio" else "http", host=host, port=port, path=path)
