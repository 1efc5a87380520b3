"""Background ingest jobs: large document batches return 202 with a status URL at once.

Every write (job or not) runs on one writer thread, so writes are serialised in arrival order. A job reports
its progress (the running step's done/total, rate and ETA) in its status and as `amsrag.progress` log lines.

With a store the job records outlive the process: an embedded index keeps them in its `jobs.json` (see
serve.file_jobs: merged under a file lock, replaced atomically, shared by every service on the directory), a
PostgreSQL index in its database (`amsrag.serve_jobs`, see serve.pg_jobs). A service reports the jobs a stopped
one left queued or running as failed (`INTERRUPTED`), not unknown, and another live one's as they are. The last
`keep` jobs are kept.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

from amsrag.errors import AmsragError
from amsrag.progress import LogProgress, Progress

log = logging.getLogger("amsrag.serve")

JOBS_FILE = "jobs.json"
INTERRUPTED = "interrupted: the service stopped before the job finished"


@dataclass
class Job:
    id: str
    kind: str
    size: int
    status: str = "queued"  # queued | running | succeeded | failed
    created: float = field(default_factory=time.time)
    started: float | None = None
    finished: float | None = None
    result: dict[str, Any] | None = None
    error: dict[str, str] | None = None
    progress: LogProgress | None = None

    @classmethod
    def from_record(cls, d: dict[str, Any]) -> Job:
        """A job as `record` stored it (its live progress is gone)."""
        return cls(str(d["id"]), str(d["kind"]), int(d["size"]), str(d["status"]), float(d["created"]),
                   d.get("started"), d.get("finished"), d.get("result"), d.get("error"))

    def record(self) -> dict[str, Any]:
        """What is persisted: the status without the live progress."""
        return {"id": self.id, "kind": self.kind, "size": self.size, "status": self.status, "created": self.created,
                "started": self.started, "finished": self.finished, "result": self.result, "error": self.error}

    def to_dict(self) -> dict[str, Any]:
        """The status; `progress`: the latest step ({task, state, done, total, rate, eta_s, elapsed_s}) once the
        job has started one, else None."""
        snap = self.progress.snapshot() if self.progress is not None else None
        return {"id": self.id, "kind": self.kind, "size": self.size, "status": self.status,
                "created": self.created, "started": self.started, "finished": self.finished,
                "progress": snap.to_dict() if snap is not None else None,
                "result": self.result, "error": self.error, "status_url": f"/v1/jobs/{self.id}"}


class JobStore(Protocol):
    """Where job records outlive the process."""

    location: str

    def load(self, keep: int) -> list[Job]:
        """Finished records to hold in memory at start (at most `keep`, oldest first); before that, those a
        stopped service left queued or running are stored as failed with INTERRUPTED."""
        ...

    def save(self, job: Job, jobs: list[Job]) -> None:
        """Store `job`'s change; `jobs`: every job this service keeps, oldest first."""
        ...

    def lookup(self, job_id: str) -> Job | None:
        """A record this service does not keep in memory (another service's, or an older one); None."""
        ...

    def close(self) -> None: ...


def interrupt(job: Job) -> Job:
    """`job` (left queued or running by a service that stopped) as failed with INTERRUPTED."""
    job.status, job.finished = "failed", time.time()
    job.error = {"code": "interrupted", "message": INTERRUPTED}
    return job


class Writer:
    """The single writer thread, and the record of the last `keep` jobs (persisted in `store` when given)."""

    def __init__(self, keep: int = 200, on_finish: Callable[[Job], None] | None = None,
                 progress_interval: float = 10.0, clock: Callable[[], float] = time.monotonic,
                 store: JobStore | None = None) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="amsrag-writer")
        self._jobs: OrderedDict[str, Job] = OrderedDict()
        self._lock = threading.Lock()
        self._keep = keep
        self._on_finish = on_finish or (lambda job: None)
        self._progress_interval = progress_interval
        self._clock = clock
        self._store: JobStore | None = store
        self._save_lock = threading.Lock()
        if self._store is not None:
            try:
                for job in self._store.load(keep):
                    self._jobs[job.id] = job
            except Exception as exc:  # the service starts; the stopped one's jobs are not marked now
                log.warning("job records in %s cannot be read (%s: %s)", self._store.location,
                            type(exc).__name__, exc)

    def _save(self, job: Job) -> None:
        """Store the change of `job` (a failure is logged: the jobs run on)."""
        if self._store is None:
            return
        with self._save_lock:  # snapshots reach the store in the order they were taken
            with self._lock:
                jobs = list(self._jobs.values())
            try:
                self._store.save(job, jobs)
            except Exception as exc:  # any store failure: the job runs on, its record stays in memory
                log.warning("job records cannot be written to %s (%s: %s)", self._store.location,
                            type(exc).__name__, exc)

    def submit(self, fn: Callable[[], Any]) -> Future:
        """A write to run in order with every other write (the caller awaits it)."""
        return self._pool.submit(fn)

    def start_job(self, kind: str, size: int, fn: Callable[[Progress], dict[str, Any]]) -> Job:
        """Run `fn(progress)` on the writer thread; its progress steps show in the job's status and the log."""
        job = Job(uuid.uuid4().hex, kind, size)
        progress = job.progress = LogProgress(interval=self._progress_interval, clock=self._clock,
                                              prefix=f"job {job.id[:12]} ({kind}): ")
        with self._lock:
            self._jobs[job.id] = job
            self._evict()
        self._save(job)

        def run() -> None:
            job.status, job.started = "running", time.time()
            self._save(job)
            try:
                job.result = fn(progress)
                job.status = "succeeded"
            except AmsragError as exc:
                job.status, job.error = "failed", {"code": "invalid_input", "message": str(exc)}
            except Exception as exc:  # the job record says what went wrong; the server keeps running
                job.status, job.error = "failed", {"code": "internal_error", "message": f"{type(exc).__name__}: {exc}"}
            finally:
                job.finished = time.time()
                with self._lock:
                    self._evict()
                self._save(job)
                self._on_finish(job)

        self._pool.submit(run)
        return job

    def _evict(self) -> None:
        """Drop the oldest finished jobs beyond `keep` (the caller holds the lock)."""
        while len(self._jobs) > self._keep:
            oldest = next(iter(self._jobs.values()))
            if oldest.status in ("queued", "running"):
                break
            self._jobs.popitem(last=False)

    def get(self, job_id: str) -> Job | None:
        """The job this service keeps, else its stored record (another service's on a shared database), else
        None."""
        with self._lock:
            job = self._jobs.get(job_id)
        if job is not None or self._store is None:
            return job
        try:
            return self._store.lookup(job_id)
        except Exception as exc:  # the record cannot be read now: unknown, as without a store
            log.warning("job %s cannot be looked up in %s (%s: %s)", job_id, self._store.location,
                        type(exc).__name__, exc)
            return None

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
        if self._store is not None:
            self._store.close()
