"""Running the external sources concurrently under a strict per-call timeout and a total budget
(`ExternalSources`), with a circuit breaker per source (`CircuitBreaker`). A source that times out
yields an explicit empty result with error "timeout"; nothing here waits past the budget."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

import httpx

from amsrag.config import ExternalConfig
from amsrag.errors import InputError
from amsrag.retrieve.external.sources import ExternalResult, HttpRetriever, make_retriever


class CircuitBreaker:
    """Opens after `failures` consecutive failures; while open the source is skipped for `cooldown_s`, then
    one trial call is let through (half-open): success closes it, failure opens it again."""

    def __init__(self, failures: int, cooldown_s: float) -> None:
        self.failures = failures
        self.cooldown_s = cooldown_s
        self._count = 0
        self._open_until = 0.0
        self._trial = False
        self._lock = threading.Lock()

    def allow(self) -> bool:
        with self._lock:
            if self._count < self.failures:
                return True
            if time.monotonic() >= self._open_until and not self._trial:
                self._trial = True
                return True
            return False

    def record(self, ok: bool) -> None:
        with self._lock:
            self._trial = False
            if ok:
                self._count = 0
            else:
                self._count += 1
                if self._count >= self.failures:
                    self._open_until = time.monotonic() + self.cooldown_s

    @property
    def state(self) -> str:
        with self._lock:
            if self._count < self.failures:
                return "closed"
            return "half_open" if time.monotonic() >= self._open_until else "open"


class ExternalSources:
    """Runs the configured sources concurrently; returns within `budget_ms` whatever happens."""

    def __init__(self, config: ExternalConfig, retrievers: Sequence[HttpRetriever] | None = None) -> None:
        self.config = config
        self.retrievers = list(retrievers) if retrievers is not None else [
            make_retriever(s, config.max_text_chars, config.neutralise_instructions) for s in config.sources]
        names = [r.name for r in self.retrievers]
        if len(set(names)) != len(names):
            raise InputError(f"external source names must be unique, got {names}")
        self.breakers = {r.name: CircuitBreaker(config.breaker_failures, config.breaker_cooldown_s)
                         for r in self.retrievers}
        self._pool = ThreadPoolExecutor(max_workers=max(1, 2 * len(self.retrievers)),
                                        thread_name_prefix="amsrag-external")
        self._client = httpx.Client(follow_redirects=False, trust_env=False,
                                    limits=httpx.Limits(max_connections=max(4, 4 * len(self.retrievers))))

    def __bool__(self) -> bool:
        return bool(self.retrievers)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._client.close()

    def __enter__(self) -> ExternalSources:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, r: HttpRetriever, query: str, k: int | None, timeout_s: float) -> ExternalResult:
        result = r.search(query, k, client=self._client, timeout_s=timeout_s)
        self.breakers[r.name].record(result.error is None)
        return result

    def search(self, query: str, k: int | None = None, budget_ms: float | None = None) -> ExternalResult:
        """All sources at once; merged passages (sources in configuration order, each by its own rank).

        `error` is None when at least one source answered, else "timeout" when any timed out (or the
        budget ran out), else the first error. `per_source` records each source's outcome.
        """
        if not isinstance(query, str) or not query.strip():
            raise InputError("empty query: external sources need a non-empty query")
        budget = (budget_ms if budget_ms is not None else self.config.budget_ms) / 1000.0
        t = time.perf_counter()
        deadline = time.monotonic() + budget
        results: dict[str, ExternalResult] = {}
        futures: dict[Future[ExternalResult], HttpRetriever] = {}
        for r in self.retrievers:
            if not self.breakers[r.name].allow():
                results[r.name] = ExternalResult([], "circuit_open", [f"circuit_open:{r.name}"], 0.0, r.name)
                continue
            futures[self._pool.submit(self._call, r, query, k, min(r.config.timeout_s, budget))] = r
        pending = set(futures)
        while pending:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            done, pending = wait(pending, timeout=left, return_when=FIRST_COMPLETED)
            for f in done:
                r = futures[f]
                try:
                    results[r.name] = f.result()
                except Exception as exc:  # a bug in one source must not sink the others
                    self.breakers[r.name].record(False)
                    results[r.name] = ExternalResult([], f"error: {type(exc).__name__}",
                                                     [f"error:{r.name}:{type(exc).__name__}"], 0.0, r.name)
        for f in pending:  # still running at the budget: an explicit timeout (the call ends on its own timeout)
            r = futures[f]
            results[r.name] = ExternalResult([], "timeout", [f"budget_exceeded:{r.name}"],
                                             (time.perf_counter() - t) * 1000, r.name)
        ordered = [results[r.name] for r in self.retrievers if r.name in results]
        passages = [p for res in ordered for p in res.passages]
        flags = [f for res in ordered for f in res.flags]
        errors = [res.error for res in ordered if res.error]
        if any(res.error is None for res in ordered):
            error = None
        elif "timeout" in errors:
            error = "timeout"
        else:
            error = errors[0] if errors else "no_sources"
        per = {res.source: {"n": len(res.passages), "error": res.error, "ms": round(res.ms, 3),
                            "breaker": self.breakers[res.source].state} for res in ordered}
        return ExternalResult(passages, error, flags, (time.perf_counter() - t) * 1000, "external", per)
