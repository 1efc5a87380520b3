"""Request admission: API keys, body size, a concurrency limit with a bounded queue, a per-request
timeout, and a readers-writer lock so a write never runs while a query reads the index."""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, TypeVar

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from amsrag.serve.errors import ApiError, error_response

T = TypeVar("T")


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


class ReadWriteLock:
    """Many readers or one writer; a waiting writer blocks new readers (no writer starvation)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._readers = 0
        self._writer = False
        self._writers_waiting = 0

    @contextmanager
    def read(self) -> Iterator[None]:
        with self._cond:
            while self._writer or self._writers_waiting:
                self._cond.wait()
            self._readers += 1
        try:
            yield
        finally:
            with self._cond:
                self._readers -= 1
                if not self._readers:
                    self._cond.notify_all()

    @contextmanager
    def write(self) -> Iterator[None]:
        with self._cond:
            self._writers_waiting += 1
            while self._writer or self._readers:
                self._cond.wait()
            self._writers_waiting -= 1
            self._writer = True
        try:
            yield
        finally:
            with self._cond:
                self._writer = False
                self._cond.notify_all()


class Admission:
    """At most `running` engine calls at once in a thread pool, at most `queued` more waiting for a slot;
    beyond that a request is refused with 429. The timeout covers queueing and running: past it the
    client gets 504, and the slot stays taken until the abandoned call really ends (threads cannot be
    killed), so an overloaded server sheds load instead of piling up work."""

    def __init__(self, running: int, queued: int, timeout_s: float,
                 on_change: Callable[[int, int], None] | None = None) -> None:
        self.running = running
        self.queued = queued
        self.timeout_s = timeout_s
        self._pool = ThreadPoolExecutor(max_workers=running, thread_name_prefix="amsrag-serve")
        self._slots = asyncio.Semaphore(running)
        self._admitted = 0  # running + waiting
        self._active = 0
        self._on_change = on_change or (lambda active, waiting: None)

    @property
    def admitted(self) -> int:
        """Calls running or waiting for a slot."""
        return self._admitted

    def _changed(self) -> None:  # gauges
        self._on_change(self._active, self._admitted - self._active)

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        if self._admitted >= self.running + self.queued:
            raise ApiError(429, "overloaded",
                           f"server busy: {self.running} requests running and {self.queued} queued; retry later",
                           {"Retry-After": "1"})
        self._admitted += 1
        self._changed()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout_s
        try:
            try:
                await asyncio.wait_for(self._slots.acquire(), timeout=self.timeout_s)
            except TimeoutError:
                raise _timeout(self.timeout_s, "waiting for a free slot") from None
        except BaseException:
            self._admitted -= 1
            self._changed()
            raise
        self._active += 1
        self._changed()
        future = loop.run_in_executor(self._pool, fn, *args)

        def release(_: object) -> None:
            self._active -= 1
            self._admitted -= 1
            self._slots.release()
            self._changed()

        future.add_done_callback(release)
        try:
            return await asyncio.wait_for(asyncio.shield(future), timeout=max(0.0, deadline - loop.time()))
        except TimeoutError:
            raise _timeout(self.timeout_s, "running") from None

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def _timeout(seconds: float, phase: str) -> ApiError:
    return ApiError(504, "timeout", f"request did not finish within {seconds:g} s ({phase})")
