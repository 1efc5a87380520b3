"""Appends off the request's path: one background thread per service, failures logged and never raised.
The query log uses it, and so does the review queue (any `Sink`: a `location`, `append` and `close`)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Generic, Protocol, TypeVar

E = TypeVar("E")
E_contra = TypeVar("E_contra", contravariant=True)

log = logging.getLogger("amsrag.querylog")
MAX_PENDING = 1000  # entries waiting to be written; beyond this they are dropped (the log is behind)
WARN_EVERY_S = 60.0  # a failing log warns at most this often (with the count of entries lost since)


class Sink(Protocol[E_contra]):
    location: str

    def append(self, entry: E_contra, /) -> object: ...

    def close(self) -> None: ...


class BackgroundAppender(Generic[E]):
    """`submit(entry)` returns at once; the entry is appended on the appender's thread, in order.
    `what`: the sink's name in warnings and the thread's name."""

    def __init__(self, query_log: Sink[E], max_pending: int = MAX_PENDING,
                 on_failure: Callable[[], object] | None = None, what: str = "query log") -> None:
        self.log = query_log
        self.what = what
        self._on_failure = on_failure or (lambda: None)
        self.max_pending = max_pending
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="amsrag-" + what.replace(" ", ""))
        self._lock = threading.Lock()
        self._pending = 0
        self._lost = 0
        self._warned = -WARN_EVERY_S
        self.failures = 0

    def submit(self, entry: E) -> None:
        with self._lock:
            if self._pending >= self.max_pending:
                self._failed(f"{self._pending} entries are waiting to be written")
                return
            self._pending += 1
        try:
            self._pool.submit(self._append, entry)
        except RuntimeError:  # shut down
            with self._lock:
                self._pending -= 1

    def _append(self, entry: E) -> None:
        try:
            self.log.append(entry)
        except Exception as exc:
            with self._lock:
                self._failed(f"{type(exc).__name__}: {exc}")
        finally:
            with self._lock:
                self._pending -= 1

    def _failed(self, why: str) -> None:
        """Under the lock: count the lost entry, warn now and then."""
        self.failures += 1
        self._lost += 1
        self._on_failure()
        now = time.monotonic()
        if now - self._warned >= WARN_EVERY_S:
            log.warning("%s %s: an entry was not written (%s); %d lost since the last warning",
                        self.what, self.log.location, why, self._lost)
            self._warned, self._lost = now, 0

    def flush(self, timeout_s: float = 30.0) -> None:
        """Wait until every entry submitted so far was written (or failed)."""
        done: Future[None] = self._pool.submit(lambda: None)
        done.result(timeout=timeout_s)

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        self.log.close()
