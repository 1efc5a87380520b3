"""The `QueryLog` protocol: an append-only, time-ordered record of answered questions with a retention."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from typing import Any, Protocol, runtime_checkable

from amsrag.querylog.entry import QueryLogEntry

PRUNE_INTERVAL = timedelta(hours=1)  # appends prune at most this often (across every process sharing the log)
PAGE = 500  # rows per read of `iter`


@runtime_checkable
class QueryLog(Protocol):
    """Entries in time order. `since` is inclusive, `until` exclusive; both are UTC (naive ones are taken as
    UTC). Every append and every prune is one transaction, safe from several threads and processes."""

    location: str  # the file, or the database URL without its password
    retention_days: float  # 0: keep every entry

    def append(self, entry: QueryLogEntry) -> int:
        """Store `entry`; its id. Prunes entries past the retention first when the last prune (by any
        process) is more than an hour old."""
        ...

    def query(self, since: datetime | None = None, until: datetime | None = None, limit: int | None = None,
              newest_first: bool = False) -> list[QueryLogEntry]: ...

    def iter(self, since: datetime | None = None, until: datetime | None = None) -> Iterator[QueryLogEntry]:
        """Every entry in the range, oldest first, read page by page."""
        ...

    def count(self, since: datetime | None = None, until: datetime | None = None) -> int: ...

    def prune(self, retention_days: float | None = None, now: datetime | None = None) -> int:
        """Delete the entries older than `retention_days` (default: the log's) before `now`; how many."""
        ...

    def close(self) -> None: ...


def cutoff(retention_days: float, now: datetime) -> datetime | None:
    """The oldest time kept, or None when the retention keeps everything."""
    return None if retention_days <= 0 else now - timedelta(days=retention_days)


def time_range(since: datetime | None, until: datetime | None, placeholder: str,
               value: Callable[[datetime], Any]) -> tuple[str, list[Any]]:
    """A WHERE clause on `ts` (since inclusive, until exclusive) with the backend's `placeholder` and its
    parameters (`value` turns a time into what the backend stores); "" when neither bound is given."""
    clauses: list[str] = []
    params: list[Any] = []
    if since is not None:
        clauses.append(f"ts >= {placeholder}")
        params.append(value(since))
    if until is not None:
        clauses.append(f"ts < {placeholder}")
        params.append(value(until))
    return (" WHERE " + " AND ".join(clauses)) if clauses else "", params
