"""What guards a front door before a request reaches a handler: API keys, the Host names served, the body size
(the HTTP service, `amsrag.serve`, stands behind all three; the MCP server's HTTP transport behind the key check)."""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Callable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from amsrag.access.errors import ApiError, error_response


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
WILDCARD_BINDS = ("0.0.0.0", "::", "")


def host_name(header: str) -> str:
    """The name of a Host header without its port, lower-cased (`[::1]:8000` -> `::1`)."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1:].split("]", 1)[0]
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


def allowed_host_names(configured: list[str], bind_host: str, keys_enabled: bool) -> frozenset[str] | None:
    """The Host names to serve (None: any): see `ServeConfig.allowed_hosts`."""
    if "*" in configured:
        return None
    if configured:
        return frozenset(host_name(h) for h in configured)
    if keys_enabled and not is_loopback(bind_host):
        return None  # every endpoint but the public ones needs the key: a rebinding page has none
    names = set(LOOPBACK_NAMES)
    if bind_host not in WILDCARD_BINDS:
        names.add(host_name(bind_host))
    return frozenset(names)


class HostCheck:
    """ASGI middleware: a request whose Host header is not an allowed name is answered 400 before any
    handler runs (DNS rebinding: a page on attacker.example resolving to 127.0.0.1 sends Host: attacker.example)."""

    def __init__(self, app: ASGIApp, allowed: frozenset[str] | None, on_reject: Callable[[], None] | None = None
                 ) -> None:
        self.app = app
        self.allowed = allowed
        self.on_reject = on_reject

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.allowed is None or scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        header = next((v.decode("latin-1") for k, v in scope.get("headers", ()) if k == b"host"), "")
        name = host_name(header)
        if name not in self.allowed:
            if self.on_reject is not None:
                self.on_reject()
            response = error_response(400, "host_not_allowed", f"Host {header[:100]!r} is not served here: the "
                                      f"allowed names are {', '.join(sorted(self.allowed))} ([serve] allowed_hosts)")
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)


class KeyCheck:
    """Bearer (or X-API-Key) authentication against a fixed set of keys; off when the set is empty."""

    def __init__(self, keys: list[str]) -> None:
        self._keys = [k.encode() for k in keys if k]

    @property
    def enabled(self) -> bool:
        return bool(self._keys)

    def check(self, authorization: str | None, x_api_key: str | None) -> None:
        if not self._keys:
            return
        given = x_api_key
        if authorization and authorization.lower().startswith("bearer "):
            given = authorization[7:].strip()
        if not given:
            raise ApiError(401, "unauthorized", "missing API key: send `Authorization: Bearer KEY` or `X-API-Key`",
                           {"WWW-Authenticate": "Bearer"})
        candidate = given.encode()
        # compare with every key (no early exit) so timing does not tell which prefix matched
        ok = False
        for key in self._keys:
            ok |= hmac.compare_digest(candidate, key)
        if not ok:
            raise ApiError(401, "unauthorized", "invalid API key", {"WWW-Authenticate": "Bearer"})


class BodyLimit:
    """ASGI middleware: request bodies above `max_bytes` are answered 413 before any handler reads them."""

    def __init__(self, app: ASGIApp, max_bytes: int, on_reject: Callable[[], None] | None = None) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.on_reject = on_reject or (lambda: None)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._reject(scope, receive, send)
            return
        body = bytearray()
        more = True
        while more:  # buffer up to the limit, then replay (chunked uploads have no content-length)
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            more = message.get("more_body", False)
            if len(body) > self.max_bytes:
                await self._reject(scope, receive, send)
                return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": bytes(body), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _reject(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.on_reject()
        response = error_response(413, "body_too_large",
                                  f"request body exceeds the limit of {self.max_bytes} bytes")
        await response(scope, receive, send)
