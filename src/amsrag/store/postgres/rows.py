"""The (id, title) of passage rows a PostgreSQL index has read, kept for `describe_rows` and the retrievers."""

from __future__ import annotations

ROW_NAMES_MAX = 200_000  # passage rows whose (id, title) a PostgresIndex keeps; past it, it starts over


class RowNames:
    """Passage row -> (id, title), as far as reads have met them. A row's id and title never change and
    a row number is never reused (passages.prow), so an entry never goes stale; thread-safe for the
    plain dict operations it uses."""

    def __init__(self, limit: int = ROW_NAMES_MAX) -> None:
        self.limit = limit
        self._names: dict[int, tuple[str, str]] = {}

    def get(self, row: int) -> tuple[str, str] | None:
        return self._names.get(row)

    def update(self, names: dict[int, tuple[str, str]]) -> None:
        if len(self._names) + len(names) > self.limit:
            self._names = {}
        self._names.update(names)
