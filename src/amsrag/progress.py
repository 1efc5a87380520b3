"""Progress reporting for long jobs: rich bars on a terminal, silence in libraries and tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Protocol

Advance = Callable[[int], None]


class Progress(Protocol):
    def task(self, description: str, total: int | None) -> AbstractContextManager[Advance]: ...


class NullProgress:
    @contextmanager
    def task(self, description: str, total: int | None) -> Iterator[Advance]:
        yield lambda n: None


class RichProgress:
    """One rich progress display; each `task` adds a bar that stays when done."""

    def __init__(self, console=None) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=console,
            transient=False,
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
