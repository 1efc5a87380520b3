"""The job records of a service on an embedded index: its `jobs.json`, shared by every service on the directory.

Several `amsrag serve` processes may run on one index directory, so no process overwrites the file with its own
view. Each change is a read-modify-write under an exclusive lock (`flock` on `.jobs.json.lock`): read the
records, put in the changed one, keep the last `keep`, write a temporary file, flush it to disk, `os.replace`.
Readers need no lock: the file is only ever replaced whole.

A record names its owner, a token whose lock file (`.jobs.json.<token>.owner`) the service holds locked for as
long as it runs. A process that dies (kill -9 included) loses its locks, so a queued or running record whose
owner's lock is free, or gone, belongs to a stopped service and is stored as failed (INTERRUPTED): at start for
every such record and whenever one is looked up. This is the PostgreSQL store's scheme (serve.pg_jobs) with
files for advisory locks.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, TypeVar

from amsrag.serve.jobs import Job, interrupt

log = logging.getLogger("amsrag.serve")
T = TypeVar("T")
LIVE = ("queued", "running")
OWNER_KEY = "owner"  # the token of the service that ran the job, beside Job.record()'s fields


class FileJobStore:
    """The records in one JSON file (an embedded index's `jobs.json`), merged and replaced under a lock."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.location = str(path)
        self.keep = 200
        self.owner = uuid.uuid4().hex
        self._lock_path = path.with_name(f".{path.name}.lock")
        self._thread_lock = threading.Lock()  # flock is per open file: this process's threads take turns first
        self._owner_fd: int | None = None

    # ---- locks ----------------------------------------------------------------------------
    def _owner_path(self, owner: str) -> Path:
        return self.path.with_name(f".{self.path.name}.{owner}.owner")

    def _hold_owner_lock(self) -> None:
        """Lock this service's owner file for as long as the store is open (taken at the first write)."""
        if self._owner_fd is not None:
            return
        fd = os.open(self._owner_path(self.owner), os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)  # a new token: nobody else holds it
        self._owner_fd = fd

    def _owner_stopped(self, owner: object) -> bool:
        """True when no process holds `owner`'s lock (or the record names none: written before owners were)."""
        if owner == self.owner:
            return False
        if not isinstance(owner, str) or not owner.isalnum():
            return True
        path = self._owner_path(owner)
        try:
            fd = os.open(path, os.O_RDWR)
        except FileNotFoundError:
            return True
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        finally:
            os.close(fd)  # releases the lock when it was taken
        with suppress(OSError):
            path.unlink()  # a stopped owner's file: nobody will hold it again
        return True

    @contextmanager
    def _exclusive(self) -> Iterator[None]:
        """The read-modify-write lock, across threads and processes."""
        with self._thread_lock:
            fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                yield
            finally:
                os.close(fd)

    # ---- the file ---------------------------------------------------------------------------
    def _read(self) -> list[dict[str, Any]]:
        """The stored records; none (with a warning) when the file cannot be read."""
        try:
            records = json.loads(self.path.read_text(encoding="utf-8")) if self.path.exists() else []
            if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
                raise ValueError("a list of job records expected")
            for r in records:
                Job.from_record(r)
        except (OSError, ValueError, TypeError, KeyError) as exc:
            log.warning("job records in %s cannot be read (%s: %s); going on without them", self.path,
                        type(exc).__name__, exc)
            return []
        return records

    def _write(self, records: list[dict[str, Any]]) -> None:
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        try:
            with tmp.open("w", encoding="utf-8") as f:
                f.write(json.dumps(records, ensure_ascii=False, default=str))
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        finally:
            tmp.unlink(missing_ok=True)

    def _interrupt_stopped(self, records: list[dict[str, Any]], only: str | None = None) -> list[Job]:
        """Mark, in `records`, the live ones whose owner stopped (only the record `only` when given) as failed."""
        stopped: dict[object, bool] = {}
        out = []
        for i, r in enumerate(records):
            if r["status"] not in LIVE or (only is not None and r["id"] != only):
                continue
            owner = r.get(OWNER_KEY)
            if owner not in stopped:
                stopped[owner] = self._owner_stopped(owner)
            if stopped[owner]:
                job = interrupt(Job.from_record(r))
                records[i] = {**job.record(), OWNER_KEY: owner}
                out.append(job)
        return out

    def _modify(self, change: Callable[[list[dict[str, Any]]], T], write: Callable[[T], bool]) -> T:
        """`change(records)` under the lock; the records are written back when `write(its result)`."""
        with self._exclusive():
            records = self._read()
            out = change(records)
            if write(out):
                self._write(records)
            return out

    # ---- the store (serve.jobs.JobStore) ----------------------------------------------------
    def load(self, keep: int) -> list[Job]:
        """The finished ones of the last `keep` records (other services' too: a live service's queued or running
        job is read from the file when asked for); the live records of stopped services stored as failed first."""
        self.keep = keep
        stopped = self._modify(self._interrupt_stopped, bool)
        if stopped:
            log.warning("%d job(s) were interrupted when the service stopped; they are reported as "
                        "failed", len(stopped))
        return [Job.from_record(r) for r in self._read()[-keep:] if r["status"] not in LIVE]

    def save(self, job: Job, jobs: list[Job]) -> None:
        """Merge `job`'s record into the file (other services' records kept); the last `keep` records stay,
        queued and running ones never dropped."""
        self._hold_owner_lock()
        record = {**job.record(), OWNER_KEY: self.owner}

        def merge(records: list[dict[str, Any]]) -> None:
            at = next((i for i, r in enumerate(records) if r["id"] == job.id), None)
            if at is None:
                records.append(record)
            else:
                records[at] = record
            excess = len(records) - self.keep
            if excess > 0:
                finished = {i for i, r in enumerate(records) if r["status"] not in LIVE}
                dropped = set(sorted(finished)[:excess])
                records[:] = [r for i, r in enumerate(records) if i not in dropped]

        self._modify(merge, lambda _: True)

    def lookup(self, job_id: str) -> Job | None:
        """The stored record of `job_id` (another service's, or one this service no longer keeps); a live one
        whose owner stopped is stored as failed first."""
        record = next((r for r in self._read() if r["id"] == job_id), None)
        if record is None:
            return None
        if record["status"] in LIVE and self._owner_stopped(record.get(OWNER_KEY)):
            stopped = self._modify(lambda records: self._interrupt_stopped(records, only=job_id), bool)
            if stopped:
                return stopped[0]
            record = next((r for r in self._read() if r["id"] == job_id), record)
        return Job.from_record(record)

    def close(self) -> None:
        if self._owner_fd is not None:
            with suppress(OSError):
                self._owner_path(self.owner).unlink()
            os.close(self._owner_fd)
            self._owner_fd = None
