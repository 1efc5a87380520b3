"""Run the activated retrievers concurrently, each under a timeout; failures degrade, never raise."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field

import numpy as np

from amsrag.retrieve.base import Retriever
from amsrag.types import Hit


@dataclass(frozen=True, slots=True)
class RetrieverRun:
    name: str
    hits: list[Hit] = field(default_factory=list)
    ms: float = 0.0
    error: str | None = None  # "timeout after N ms" or the exception, when the retriever failed


def _timed(retriever: Retriever, query: str, depth: int, vector: np.ndarray | None) -> tuple[list[Hit], float]:
    t = time.perf_counter()
    hits = retriever.search(query, k=depth, query_vector=vector)
    return hits, (time.perf_counter() - t) * 1000


class RetrieverExecutor:
    """A small thread pool shared by every query of an engine."""

    def __init__(self, max_workers: int = 4) -> None:
        self.max_workers = max_workers
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="amsrag-retrieve")

    def prestart(self, timeout_s: float = 10.0) -> None:
        """Start every worker thread now, from the caller. A thread inherits its creator's scheduling
        priority: workers first started by a low-priority background job (a shadow probe) would stay slow."""
        barrier = threading.Barrier(self.max_workers)

        def wait() -> None:
            with contextlib.suppress(threading.BrokenBarrierError):
                barrier.wait(timeout_s)

        for fut in [self._pool.submit(wait) for _ in range(self.max_workers)]:
            fut.result(timeout=timeout_s + 1)

    def run(self, retrievers: Mapping[str, Retriever], query: str, depth: int, query_vector: np.ndarray | None,
            timeout_s: float) -> dict[str, RetrieverRun]:
        if len(retrievers) == 1:  # no thread hop for a single retriever
            (name, r), = retrievers.items()
            try:
                hits, ms = _timed(r, query, depth, query_vector)
                return {name: RetrieverRun(name, hits, ms)}
            except Exception as exc:  # a broken retriever degrades the result; the trace says why
                return {name: RetrieverRun(name, [], 0.0, f"{type(exc).__name__}: {exc}")}
        start = time.perf_counter()
        futures: dict[str, Future[tuple[list[Hit], float]]] = {
            name: self._pool.submit(_timed, r, query, depth, query_vector) for name, r in retrievers.items()}
        runs: dict[str, RetrieverRun] = {}
        for name, fut in futures.items():
            remaining = max(0.0, timeout_s - (time.perf_counter() - start))
            try:
                hits, ms = fut.result(timeout=remaining)
                runs[name] = RetrieverRun(name, hits, ms)
            except FutureTimeout:
                fut.cancel()
                runs[name] = RetrieverRun(name, [], timeout_s * 1000, f"timeout after {timeout_s * 1000:.0f} ms")
            except Exception as exc:
                runs[name] = RetrieverRun(name, [], (time.perf_counter() - start) * 1000,
                                          f"{type(exc).__name__}: {exc}")
        return runs

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
