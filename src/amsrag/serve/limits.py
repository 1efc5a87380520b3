"""Request admission in the HTTP service: a concurrency limit with a bounded queue, a per-request timeout, and a
readers-writer lock so a write never runs while a query reads the index (keys, Host names and body size:
`amsrag.access.limits`)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, TypeVar

from amsrag.access.errors import ApiError

T = TypeVar("T")


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
