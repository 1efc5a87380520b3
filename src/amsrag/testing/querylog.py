"""The query log conformance suite: every `QueryLog` backend stores, reads, prunes and shares the same way.

Subclass `QueryLogConformance` in a backend's test module (its name starting with `Test`) and implement
`create_log` (a new empty log; `clock` replaces the time of appends), `spec` (the index spec another
process opens the same log with: a directory or a postgresql:// URL) and `stored_text` (everything the
backend stored, as text, to search for secrets).

This module imports pytest; nothing else in amsrag imports it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, ClassVar

import pytest

from amsrag.config import QueryLogConfig
from amsrag.querylog import QueryLog, QueryLogEntry, Redactor, entry_from_answer
from amsrag.querylog.base import PAGE

T0 = datetime(2025, 3, 1, 12, 0, 0, 123456, tzinfo=UTC)
LogFactory = Callable[..., QueryLog]


def sample_entry(ts: datetime = T0, **changes: Any) -> QueryLogEntry:
    """A full entry: every column set, the JSON ones nested, text beyond ASCII."""
    entry = QueryLogEntry(
        ts=ts, source="api", system="full", query="Who wrote «Der Process»? 谁写的", language="en",
        label="one_hop", alpha=0.8125, route_label="multi_hop", route_alpha=0.5625, strategy="C",
        retrievers=["dense", "bm25", "graph"], retriever_calls=4, escalations=1, corrective_action="ambiguous",
        abstained=False, answer="Franz Kafka", citations=["Kafka#0", "The Trial#2"], generator="extractive",
        confidence=0.71875, total_ms=123.5, timings={"embed": 4.25, "retrieve": {"bm25": 1.5, "dense": 2.0},
                                                     "total": 123.5},
        signals={"probs": {"zero_hop": 0.0625, "one_hop": 0.8125, "multi_hop": 0.125}, "fusion": {"method": "ca-rrf"}},
        audit={"support": 0.5, "flagged": True, "sentences": [{"text": "x", "supported": False}]}, flagged=True)
    return replace(entry, **changes)


class QueryLogConformance(ABC):
    """The backend-independent query log tests; a subclass per backend supplies the hooks below."""

    backend: ClassVar[str] = ""

    # ---- hooks -------------------------------------------------------------------------
    @abstractmethod
    def create_log(self, request: pytest.FixtureRequest, directory: Path, retention_days: float,
                   clock: Callable[[], datetime] | None) -> QueryLog:
        """A new empty log of the backend; `directory` is a fresh path it may use."""

    @abstractmethod
    def spec(self, log: Any) -> str:
        """The index spec (directory or URL) whose query log `log` is."""

    @abstractmethod
    def stored_text(self, log: Any) -> str:
        """Every stored byte of `log`, as text."""

    @pytest.fixture
    def make_log(self, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LogFactory]:
        """A factory of new empty logs of the backend, closed after the test."""
        made: list[QueryLog] = []

        def make(retention_days: float = 30.0, clock: Callable[[], datetime] | None = None) -> QueryLog:
            log = self.create_log(request, tmp_path / f"log{len(made)}", retention_days, clock)
            made.append(log)
            return log

        yield make
        for log in made:
            log.close()

    # ---- tests -------------------------------------------------------------------------
    def test_is_a_query_log(self, make_log: LogFactory) -> None:
        log = make_log()
        assert isinstance(log, QueryLog)
        assert log.count() == 0 and log.query() == [] and list(log.iter()) == []

    def test_round_trip(self, make_log: LogFactory) -> None:
        log = make_log()
        full = sample_entry()
        bare = sample_entry(T0 + timedelta(seconds=1), language=None, label=None, alpha=None, route_label=None,
                            route_alpha=None, corrective_action=None, answer=None, citations=[], generator=None,
                            confidence=None, total_ms=None, timings={}, signals={}, audit=None, flagged=False,
                            abstained=True)
        ids = [log.append(full), log.append(bare)]
        assert ids[0] != ids[1]
        got = log.query()
        assert got == [full.with_id(ids[0]), bare.with_id(ids[1])]
        assert got[0].ts.tzinfo is not None and got[0].ts.utcoffset() == timedelta(0)
        assert QueryLogEntry.from_dict(json.loads(json.dumps(got[0].to_dict()))) == got[0]

    def test_time_range_order_and_limit(self, make_log: LogFactory) -> None:
        log = make_log()
        stamps = [T0 + timedelta(minutes=i) for i in range(5)]
        for i, ts in enumerate(stamps):
            log.append(sample_entry(ts, query=f"q{i}"))
        naive = stamps[1].replace(tzinfo=None)  # naive times are UTC
        assert [e.query for e in log.query(since=naive, until=stamps[4])] == ["q1", "q2", "q3"]
        assert log.count(since=stamps[1], until=stamps[4]) == 3 and log.count() == 5
        assert [e.query for e in log.query(since=stamps[2].astimezone(timezone_plus(2)))] == ["q2", "q3", "q4"]
        assert [e.query for e in log.query(limit=2, newest_first=True)] == ["q4", "q3"]
        assert [e.query for e in log.iter(until=stamps[2])] == ["q0", "q1"]

    def test_iter_reads_page_by_page_in_time_order(self, make_log: LogFactory) -> None:
        log = make_log()
        n = PAGE + 7
        # appended out of time order, several at one instant: read back by (time, id)
        for i in range(n):
            log.append(sample_entry(T0 + timedelta(seconds=(i * 7919) % 97), query=str(i)))
        got = list(log.iter())
        assert len(got) == n and len({e.id for e in got}) == n
        assert [(e.ts, e.id) for e in got] == sorted((e.ts, e.id) for e in got)
        assert list(log.iter(since=T0 + timedelta(seconds=50))) == [e for e in got
                                                                   if e.ts >= T0 + timedelta(seconds=50)]

    def test_prune_by_retention(self, make_log: LogFactory) -> None:
        now = datetime.now(UTC)
        log = make_log(retention_days=30)
        for days in (45, 31, 29, 1, 0):
            log.append(sample_entry(now - timedelta(days=days), query=f"{days} days old"))
        assert log.prune(retention_days=0) == 0  # 0 keeps every entry
        assert log.prune() == 2
        assert [e.query for e in log.query()] == ["29 days old", "1 days old", "0 days old"]
        assert log.prune(retention_days=7, now=now) == 1 and log.count() == 2

    def test_appends_prune_at_most_once_an_hour(self, make_log: LogFactory) -> None:
        clock = [datetime.now(UTC)]
        log = make_log(retention_days=1, clock=lambda: clock[0])
        old = clock[0] - timedelta(days=3)
        log.append(sample_entry(old, query="a"))  # the first append prunes before it writes: a stays
        clock[0] += timedelta(minutes=59)
        log.append(sample_entry(old, query="b"))
        assert log.count() == 2  # no prune within the hour
        clock[0] += timedelta(minutes=2)
        log.append(sample_entry(clock[0], query="new"))
        assert [e.query for e in log.query()] == ["new"]

    def test_concurrent_appends_from_threads(self, make_log: LogFactory) -> None:
        log = make_log()
        threads, per_thread, errors = 6, 25, []

        def work(t: int) -> None:
            try:
                for i in range(per_thread):
                    log.append(sample_entry(T0 + timedelta(milliseconds=i), query=f"{t}/{i}"))
                    if i % 10 == 0:
                        log.count()
            except Exception as exc:  # the assertion below reports it
                errors.append(exc)

        workers = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        assert errors == []
        got = log.query()
        assert len(got) == threads * per_thread == len({e.id for e in got}) == len({e.query for e in got})

    def test_a_second_process_appends_while_this_one_has_it_open(self, make_log: LogFactory) -> None:
        log = make_log()
        n = 20
        code = ("import sys; from datetime import UTC, datetime\n"
                "from amsrag.config import QueryLogConfig\n"
                "from amsrag.querylog import open_query_log\n"
                "from amsrag.testing.querylog import sample_entry\n"
                "log = open_query_log(sys.argv[1], QueryLogConfig(), create=True)\n"
                f"for i in range({n}):\n"
                "    log.append(sample_entry(datetime.now(UTC), query=f'other {i}', source='cli'))\n"
                "log.close()\n")
        proc = subprocess.Popen([sys.executable, "-c", code, self.spec(log)], stderr=subprocess.PIPE, text=True)
        for i in range(n):
            log.append(sample_entry(datetime.now(UTC), query=f"this {i}"))
        _, stderr = proc.communicate(timeout=120)
        assert proc.returncode == 0, stderr
        sources = [e.source for e in log.query()]
        assert sources.count("cli") == n and sources.count("api") == n

    def test_nothing_secret_is_stored(self, make_log: LogFactory) -> None:
        log = make_log()
        key = "test-key-0123456789abcdef"
        answer = {"query": f"is Bearer {key} or sk-live-abcdefghijklmnopqrstu a valid key?", "answer": key,
                  "citations": ["p1"], "abstained": False,
                  "trace": {"system": "full", "strategy": "A", "retrievers": [], "timings_ms": {"total": 1.0},
                            "generator": {"name": "openai", "error": f"401 from https://u:hunter22@api/v1 ({key})"},
                            "audit": {"flagged": False, "note": key}}}
        entry = entry_from_answer(answer, QueryLogConfig(), redactor=Redactor([key]))
        log.append(entry)
        stored = self.stored_text(log)
        for secret in (key, "sk-live-abcdefghijklmnopqrstu", "hunter22"):
            assert secret not in stored
        assert "[redacted]" in stored and "a valid key?" in stored


def timezone_plus(hours: int) -> Any:
    from datetime import timezone

    return timezone(timedelta(hours=hours))
