"""`index sync --watch`: keep an index equal to folders for as long as it runs.

One `sync_folders` at start, then one after every batch of file-system changes (watchfiles: changes that
come in a burst are gathered until `step_ms` pass without a new one, or `debounce_ms` in all). Each sync
hashes the folders' files and re-reads only those whose sha256 changed, so a batch costs the changed files
plus one hash per file. A file that cannot be read yet (empty, half-written JSONL, a truncated PDF) is
skipped with what it had stored kept; its next change, or the retry after a failed batch, reads it again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from amsrag.errors import AmsragError, InputError
from amsrag.indexing.job import JobReport, Notice
from amsrag.indexing.sync import sync_folders
from amsrag.ingest.api import InputRoot, input_roots
from amsrag.store.base import Store

log = logging.getLogger("amsrag.watch")
INSTALL_HINT = 'pip install "amsrag[watch]"'
DEBOUNCE_MS = 1_600  # longest a burst of changes is gathered before it is synced
STEP_MS = 200  # a batch closes once no change came for this long
RUST_TIMEOUT_MS = 1_000  # the watcher wakes at least this often (stop, retries)
RETRY_S = 2.0  # first wait before a failed batch is tried again; doubled up to MAX_RETRY_S
MAX_RETRY_S = 60.0
SKIPPED_NAMED = 3  # skipped files named in a batch line


def require_watchfiles() -> ModuleType:
    """The watchfiles module, or an InputError saying how to install it."""
    try:
        import watchfiles
    except ImportError:
        raise InputError(f"watching folders needs the watchfiles package: {INSTALL_HINT}") from None
    return watchfiles


@dataclass
class WatchBatch:
    """One sync of the watched folders: how many file changes set it off (0: the first sync, or a retry of a
    failed one), what the sync did or the error that stopped it, and how long it took."""

    number: int
    changes: int
    seconds: float
    passages: int  # in the index after the batch
    report: JobReport | None = None
    error: str | None = None
    retry_s: float | None = None  # a failed batch: tried again after this long unless a change comes first

    def line(self) -> str:
        """One line for a terminal or a log."""
        cause = f"{self.changes} file change(s)" if self.changes else ("first sync" if self.number == 1 else "retry")
        head = f"batch {self.number} ({cause})"
        if self.error is not None or self.report is None:
            return (f"{head}: sync failed after {self.seconds:.1f} s: {self.error}; tried again on the next "
                    f"change or in {self.retry_s or 0:.0f} s")
        r = self.report
        text = (f"{head}: {r.added} passages added, {r.removed} removed; documents {r.documents_created} new, "
                f"{r.documents_replaced} changed, {r.documents_deleted} deleted; {r.embedded} embedded; "
                f"index {self.passages} passages; {self.seconds:.1f} s")
        skipped = [f"{s['file']} ({s['reason']})" for s in r.skipped_files]
        if skipped:
            more = f" and {len(skipped) - SKIPPED_NAMED} more" if len(skipped) > SKIPPED_NAMED else ""
            text += f"; not read: {'; '.join(skipped[:SKIPPED_NAMED])}{more}"
        return text

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"batch": self.number, "changes": self.changes, "seconds": round(self.seconds, 3),
                               "passages": self.passages, "error": self.error}
        if self.report is not None:
            out["report"] = self.report.to_dict()
        return out


@dataclass
class WatchSummary:
    """What a watch did over its whole run."""

    batches: int = 0
    failed: int = 0
    changes: int = 0
    added: int = 0
    removed: int = 0
    passages: int = 0
    interrupted: bool = False  # ended by Ctrl-C rather than its stop event
    started: float = field(default_factory=time.monotonic)

    def record(self, batch: WatchBatch) -> None:
        self.batches += 1
        self.changes += batch.changes
        self.passages = batch.passages
        if batch.report is None:
            self.failed += 1
        else:
            self.added += batch.report.added
            self.removed += batch.report.removed

    def line(self) -> str:
        """The last line of a watch."""
        how = "interrupted" if self.interrupted else "stopped"
        return (f"watch {how} after {time.monotonic() - self.started:.0f} s: {self.batches} sync(s) "
                f"({self.failed} failed) over {self.changes} file change(s); {self.added} passages added, "
                f"{self.removed} removed; the index holds {self.passages} passages")

    def to_dict(self) -> dict[str, Any]:
        return {"batches": self.batches, "failed": self.failed, "changes": self.changes, "added": self.added,
                "removed": self.removed, "passages": self.passages, "interrupted": self.interrupted,
                "seconds": round(time.monotonic() - self.started, 3)}


def check_watch(index_path: Path | None, folders: Sequence[Path | str]) -> list[InputRoot]:
    """The folders' roots, refused when one is not a folder or holds the index directory `index_path` (whose
    own writes would set off syncs without end)."""
    roots = input_roots(folders)
    for root in roots:
        if not root.path.is_dir():
            raise InputError(f"{root.path}: --watch keeps folders in step; give a folder")
        if index_path is not None and index_path.resolve().is_relative_to(root.path.resolve()):
            raise InputError(f"the index {index_path} is inside the watched folder {root.path}: its own writes "
                             f"would be synced without end; keep the index outside the folder")
    return roots


class _Batcher:
    """Runs the syncs of a watch and decides when a failed one is tried again."""

    def __init__(self, index: Store, folders: Sequence[Path | str], fmt: str, delete: bool,
                 on_batch: Callable[[WatchBatch], None], notice: Notice | None, tags: Sequence[str] = ()) -> None:
        self.index, self.folders, self.fmt, self.delete = index, list(folders), fmt, delete
        self.tags = list(tags)
        self.on_batch, self.notice = on_batch, notice
        self.summary = WatchSummary()
        self.retry_at: float | None = time.monotonic()  # the first sync is due at once
        self.backoff = RETRY_S

    def due(self) -> bool:
        return self.retry_at is not None and time.monotonic() >= self.retry_at

    def run(self, changes: int) -> WatchBatch:
        t = time.perf_counter()
        report: JobReport | None = None
        error: str | None = None
        try:
            report = sync_folders(self.index, self.folders, self.fmt, delete=self.delete, notice=self.notice,
                                  skip_unreadable=True, tags=self.tags)
        except (AmsragError, OSError) as exc:  # e.g. a file removed while it was hashed, a busy index
            error = f"{type(exc).__name__}: {exc}" if isinstance(exc, OSError) else str(exc)
            log.debug("watch: sync failed", exc_info=True)
        retry_s = self._schedule(failed=error is not None)
        batch = WatchBatch(self.summary.batches + 1, changes, time.perf_counter() - t, len(self.index), report, error,
                           retry_s)
        self.summary.record(batch)
        self.on_batch(batch)
        return batch

    def _schedule(self, failed: bool) -> float | None:
        """After a failure, when to try again unasked (None after a success)."""
        if not failed:
            self.retry_at, self.backoff = None, RETRY_S
            return None
        wait = self.backoff
        self.retry_at = time.monotonic() + wait
        self.backoff = min(self.backoff * 2, MAX_RETRY_S)
        return wait


def watch_and_sync(index: Store, folders: Sequence[Path | str], *, fmt: str = "auto", delete: bool = True,
                   stop_event: threading.Event | None = None, on_batch: Callable[[WatchBatch], None] | None = None,
                   notice: Notice | None = None, debounce_ms: int = DEBOUNCE_MS, step_ms: int = STEP_MS,
                   rust_timeout_ms: int = RUST_TIMEOUT_MS, force_polling: bool | None = None,
                   tags: Sequence[str] = ()) -> WatchSummary:
    """Keep `index` equal to `folders` (each `PATH` or `NAME=PATH`, as `index sync`) until `stop_event` is set
    or Ctrl-C: one sync at start, then one per batch of changes (see the module doc); a failed batch is
    reported and tried again on the next change or after a back-off (2 s, doubling up to 60 s). Every batch goes
    to `on_batch` (default: the log). `delete=False` keeps documents whose file is gone; `tags` (`--tag`) go to
    every document."""
    watchfiles = require_watchfiles()
    path = getattr(index, "path", None)  # an embedded index's directory
    roots = check_watch(path if isinstance(path, Path) else None, folders)
    batcher = _Batcher(index, folders, fmt, delete, on_batch or (lambda b: log.info("%s", b.line())), notice, tags)
    # The watcher is running before the first sync, so a change made during it is not missed.
    changes_seen: Iterable[set[Any]] = watchfiles.watch(
        *(r.path for r in roots), debounce=debounce_ms, step=step_ms, stop_event=stop_event,
        rust_timeout=rust_timeout_ms, yield_on_timeout=True, raise_interrupt=False, force_polling=force_polling)
    try:
        for changes in changes_seen:
            if changes or batcher.due():
                batcher.run(len(changes))
            if stop_event is not None and stop_event.is_set():
                break
    except KeyboardInterrupt:  # during a sync; its transaction rolled back, the next run resumes it
        pass
    # Ctrl-C while waiting ends watchfiles' loop quietly: whatever ended it but the stop event was Ctrl-C.
    batcher.summary.interrupted = stop_event is None or not stop_event.is_set()
    return batcher.summary


class FolderWatcher:
    """`watch_and_sync` on a thread of its own beside a service, with its own handle on the index (as a
    `amsrag index sync` in another process would have: the service reloads the generation it publishes)."""

    def __init__(self, index_spec: str | Path, folders: Sequence[Path | str], *, fmt: str = "auto",
                 delete: bool = True, **options: Any) -> None:
        """`options`: the keyword arguments of `watch_and_sync` (`debounce_ms`, `on_batch`, ...)."""
        self.index_spec, self.folders, self.fmt, self.delete = index_spec, list(folders), fmt, delete
        self.options = options
        self.stop_event = threading.Event()
        self.summary: WatchSummary | None = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="amsrag-folder-watch", daemon=True)

    def start(self) -> None:
        """Check the folders and watchfiles here (a bad argument is an error of the caller), then watch."""
        from amsrag.store.open import is_postgres_url

        require_watchfiles()
        check_watch(None if is_postgres_url(self.index_spec) else Path(self.index_spec), self.folders)
        self._thread.start()

    def stop(self, timeout_s: float = 60.0) -> None:
        """Ask the watch to end and wait for a sync under way to finish (up to `timeout_s`)."""
        self.stop_event.set()
        if self._thread.is_alive():
            self._thread.join(timeout_s)
            if self._thread.is_alive():
                log.warning("the folder watch did not stop within %.0f s (a sync is still running)", timeout_s)

    def _run(self) -> None:
        from amsrag.store.open import open_index

        try:
            with open_index(self.index_spec) as index:
                self.summary = watch_and_sync(index, self.folders, fmt=self.fmt, delete=self.delete,
                                              stop_event=self.stop_event, **self.options)
            log.info("%s", self.summary.line())
        except Exception as exc:  # the service goes on; the log says why its folders stopped being synced
            self.error = exc
            log.exception("the folder watch stopped")

    def __enter__(self) -> FolderWatcher:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
