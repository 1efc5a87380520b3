"""Background ingest jobs: large document batches return 202 with a status URL at once.

Every write (job or not) runs on one writer thread, so writes are serialised in arrival order. A job reports
its progress (the running step's done/total, rate and ETA) in its status and as `amsrag.progress` log lines.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from amsrag.errors import AmsragError
from amsrag.progress import LogProgress, Progress


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

    def to_dict(self) -> dict[str, Any]:
        """The status; `progress`: the latest step ({task, state, done, total, rate, eta_s, elapsed_s}) once the
        job has started one, else None."""
        snap = self.progress.snapshot() if self.progress is not None else None
        return {"id": self.id, "kind": self.kind, "size": self.size, "status": self.status,
                "created": self.created, "started": self.started, "finished": self.finished,
                "progress": snap.to_dict() if snap is not None else None,
                "result": self.result, "error": self.error, "status_url": f"/v1/jobs/{self.id}"}


class Writer:
    """The single writer thread, and the record of the last `keep` jobs."""

    def __init__(self, keep: int = 200, on_finish: Callable[[Job], None] | None = None,
                 progress_interval: float = 10.0, clock: Callable[[], float] = time.monotonic) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="amsrag-writer")
        self._jobs: OrderedDict[str, Job] = OrderedDict()
        self._lock = threading.Lock()
        self._keep = keep
        self._on_finish = on_finish or (lambda job: None)
        self._progress_interval = progress_interval
        self._clock = clock

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
            while len(self._jobs) > self._keep:
                oldest = next(iter(self._jobs.values()))
                if oldest.status in ("queued", "running"):
                    break
                self._jobs.popitem(last=False)

        def run() -> None:
            job.status, job.started = "running", time.time()
            try:
                job.result = fn(progress)
                job.status = "succeeded"
            except AmsragError as exc:
                job.status, job.error = "failed", {"code": "invalid_input", "message": str(exc)}
            except Exception as exc:  # the job record says what went wrong; the server keeps running
                job.status, job.error = "failed", {"code": "internal_error", "message": f"{type(exc).__name__}: {exc}"}
            finally:
                job.finished = time.time()
                self._on_finish(job)

        self._pool.submit(run)
        return job

    def get(self, job_id: str) -> Job | None:
        with self._lock:
            return self._jobs.get(job_id)

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
