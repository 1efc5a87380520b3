"""Progress reporting for long jobs: rich bars on a terminal, log lines elsewhere, silence in libraries and tests.

- `RichProgress`: live bars, for a terminal: done/total, rate (items/s), elapsed, ETA;
- `LogProgress`: for a non-terminal (CI, a log file, the service's background jobs): one line per task when it
  starts, one every `interval` seconds while it advances, one when it ends, each with done/total, percent, rate
  and ETA (`dense: embed 3000/40000 (7.5%) 21.3/s ETA 29m00s`), written to a text stream and/or the
  `amsrag.progress` logger; `snapshot()` is the latest task's state (the job API reports it);
- `NullProgress`: nothing;
- `progress_for(console, quiet)`: the right one of the three for a console.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any, Protocol, TextIO

Advance = Callable[[int], None]
LOGGER = "amsrag.progress"
INTERVAL_ENV = "AMSRAG_PROGRESS_INTERVAL"
DEFAULT_INTERVAL_S = 10.0


class Progress(Protocol):
    def task(self, description: str, total: int | None) -> AbstractContextManager[Advance]: ...


class NullProgress:
    def __enter__(self) -> NullProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    @contextmanager
    def task(self, description: str, total: int | None) -> Iterator[Advance]:
        yield lambda n: None


def format_rate(rate: float | None) -> str:
    """Items per second as the bars and log lines show it: `21.3/s`; `?/s` when not known yet."""
    return "?/s" if rate is None else f"{rate:.1f}/s"


@functools.cache
def _rate_column_class() -> type:
    from rich.progress import ProgressColumn, Task
    from rich.text import Text

    class RateColumn(ProgressColumn):
        """Items per second: rich's recent-window speed while running (the average since the start when the
        window holds too few samples), the average over the whole task once it is finished."""

        def render(self, task: Task) -> Text:
            elapsed = task.finished_time if task.finished else task.elapsed
            average = task.completed / elapsed if elapsed and task.completed else None
            speed = average if task.finished else (task.speed if task.speed is not None else average)
            return Text(format_rate(speed), style="progress.data.speed")

    return RateColumn


class RichProgress:
    """One rich progress display; each `task` adds a bar that stays when done. A bar shows done/total, the rate
    (items/s, e.g. passages/s while embedding), the time elapsed and the ETA. `clock` is injectable (tests)."""

    def __init__(self, console=None, clock: Callable[[], float] | None = None) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self._progress = Progress(
            # the description is data (a file name, an index path), never markup
            TextColumn("{task.description}", style="bold", markup=False),
            BarColumn(),
            MofNCompleteColumn(),
            _rate_column_class()(),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=console,
            transient=False,
            get_time=clock,
        )

    def __enter__(self) -> RichProgress:
        self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._progress.stop()

    @contextmanager
    def task(self, description: str, total: int | None) -> Iterator[Advance]:
        tid = self._progress.add_task(description, total=total)
        try:
            yield lambda n: self._progress.advance(tid, n)
        finally:
            if total is not None:
                self._progress.update(tid, completed=total)


# ---------------------------------------------------------------------------- log lines
def format_duration(seconds: float) -> str:
    """`45s`, `29m00s`, `2h05m09s`."""
    s = max(0, round(seconds))
    h, rest = divmod(s, 3600)
    m, s = divmod(rest, 60)
    if h:
        return f"{h}h{m:02d}m{s:02d}s"
    if m:
        return f"{m}m{s:02d}s"
    return f"{s}s"


@dataclass(frozen=True, slots=True)
class TaskSnapshot:
    """One task's state at one moment: what the log line and the job API report."""

    task: str
    done: int
    total: int | None
    elapsed_s: float
    state: str  # running | done | failed

    @property
    def rate(self) -> float:
        """Items per second since the task started (0.0 before any time has passed)."""
        return self.done / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def eta_s(self) -> float | None:
        """Seconds left at the rate so far; None without a total or before anything was done."""
        if self.total is None:
            return None
        if self.state == "failed":
            return None
        if self.done >= self.total or self.state == "done":
            return 0.0
        rate = self.rate
        return (self.total - self.done) / rate if rate > 0 else None

    def _head(self) -> str:
        head = f"{self.task} {self.done}"
        if self.total is not None:
            pct = 100.0 * self.done / self.total if self.total else 100.0
            head += f"/{self.total} ({pct:.1f}%)"
        return head

    def start_line(self) -> str:
        return f"{self._head()} started"

    def line(self) -> str:
        """The line of a running task (rate, ETA) or of an ended one (rate, time taken)."""
        head = self._head()
        head += f" {format_rate(self.rate)}"
        if self.state == "done":
            return f"{head} done in {format_duration(self.elapsed_s)}"
        if self.state == "failed":
            return f"{head} failed after {format_duration(self.elapsed_s)}"
        eta = self.eta_s
        if self.total is not None:
            head += f" ETA {format_duration(eta) if eta is not None else '?'}"
        return head

    def to_dict(self) -> dict[str, Any]:
        eta = self.eta_s
        return {"task": self.task, "state": self.state, "done": self.done, "total": self.total,
                "rate": round(self.rate, 3), "eta_s": None if eta is None else round(eta, 1),
                "elapsed_s": round(self.elapsed_s, 3)}


class _Task:
    def __init__(self, description: str, total: int | None, started: float) -> None:
        self.description = description
        self.total = total
        self.started = started
        self.done = 0
        self.state = "running"
        self.ended: float | None = None
        self.last_line = started

    def snapshot(self, now: float) -> TaskSnapshot:
        end = self.ended if self.ended is not None else now
        return TaskSnapshot(self.description, self.done, self.total, max(0.0, end - self.started), self.state)


class LogProgress:
    """Progress as plain log lines, for a non-terminal: one line when a task starts, then at most one every
    `interval` seconds while it advances, and one when it ends. Lines go to `stream` (flushed each time) and/or
    `logger`; with neither given, to the `amsrag.progress` logger. Thread-safe: `advance` may be called from any
    thread. `clock` is injectable (tests); it defaults to `time.monotonic`."""

    def __init__(self, stream: TextIO | None = None, logger: logging.Logger | None = None,
                 interval: float = DEFAULT_INTERVAL_S, clock: Callable[[], float] = time.monotonic,
                 prefix: str = "", level: int = logging.INFO) -> None:
        if not interval >= 0:
            raise ValueError(f"the progress interval must be >= 0 seconds, got {interval}")
        self.stream = stream
        self.logger = logger if logger is not None or stream is not None else logging.getLogger(LOGGER)
        self.interval = float(interval)
        self.clock = clock
        self.prefix = prefix
        self.level = level
        self._lock = threading.Lock()
        self._latest: _Task | None = None

    def __enter__(self) -> LogProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def _emit(self, line: str) -> None:
        """Called with the lock held, so lines of concurrent tasks never interleave mid-line."""
        line = self.prefix + line
        if self.stream is not None:
            self.stream.write(line + "\n")
            self.stream.flush()
        if self.logger is not None:
            self.logger.log(self.level, "%s", line)

    @contextmanager
    def task(self, description: str, total: int | None) -> Iterator[Advance]:
        with self._lock:
            t = _Task(description, total, self.clock())
            self._latest = t
            self._emit(t.snapshot(t.started).start_line())

        def advance(n: int) -> None:
            with self._lock:
                t.done += n
                self._latest = t
                now = self.clock()
                if now - t.last_line >= self.interval and (t.total is None or t.done < t.total):
                    t.last_line = now
                    self._emit(t.snapshot(now).line())

        ok = False
        try:
            yield advance
            ok = True
        finally:
            with self._lock:
                t.ended = self.clock()
                t.state = "done" if ok else "failed"
                self._emit(t.snapshot(t.ended).line())

    def snapshot(self) -> TaskSnapshot | None:
        """The state of the task that started or advanced last (None before any task)."""
        with self._lock:
            return None if self._latest is None else self._latest.snapshot(self.clock())


def progress_interval(default: float = DEFAULT_INTERVAL_S) -> float:
    """$AMSRAG_PROGRESS_INTERVAL (seconds between log lines), else `default`."""
    raw = os.environ.get(INTERVAL_ENV, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        return default
    return value if value >= 0 else default


def progress_for(console=None, quiet: bool = False, interval: float | None = None
                 ) -> RichProgress | LogProgress | NullProgress:
    """What a command shows while it works: nothing when `quiet`; rich bars when `console` (a rich Console,
    default: one on stderr) is a terminal; otherwise `LogProgress` lines on the console's stream every
    `interval` seconds (default: $AMSRAG_PROGRESS_INTERVAL or 10). Use it as a context manager."""
    if quiet:
        return NullProgress()
    if console is None:
        from rich.console import Console

        console = Console(stderr=True)
    if console.is_terminal:
        return RichProgress(console=console)
    return LogProgress(stream=console.file, interval=progress_interval() if interval is None else interval)
