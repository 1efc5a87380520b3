"""What the structured route's parts exchange: rows a guarded statement returned, the runner that
executes a statement, and the answer with the SQL and the rows it came from."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from amsrag.errors import InputError
from amsrag.tables.table import TableProfile

# SQL functions a statement may call (upper case); anything else is refused by the guard.
ALLOWED_FUNCTIONS: frozenset[str] = frozenset({
    "COUNT", "SUM", "AVG", "MIN", "MAX", "ABS", "LOWER", "UPPER", "LENGTH", "ROUND", "COALESCE", "CAST",
    "SUBSTR", "TRIM", "IFNULL", "NULLIF",
})
DEFAULT_ROW_LIMIT = 1000
DEFAULT_TIMEOUT_S = 2.0


class SqlRefused(InputError):
    """A statement the guard will not run; the message names the reason."""


class SqlTimeout(InputError):
    """A statement that ran out of its time budget (and was interrupted)."""


@dataclass(frozen=True, slots=True)
class QueryRows:
    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]
    truncated: bool = False  # more rows existed than the row limit


class SqlRunner(Protocol):
    """Runs one read-only SELECT over the tables it allows, after the guard has checked it."""

    def run(self, sql: str, params: Sequence[object] = ()) -> QueryRows: ...


@dataclass(frozen=True, slots=True)
class StructuredAnswer:
    """The structured route's answer: the values, the SQL that produced them and the source rows."""

    table_id: str
    answer: tuple[str, ...]  # one value, or several ("a|b" questions); empty: no program answered
    sql: str
    row_ids: tuple[int, ...]  # the table rows the answer came from (citations `table_id#row=N`)
    confidence: float  # the ranker's calibrated probability that the program is right
    program: str = ""  # the program kind: lookup, count, superlative, …
    candidates: int = 0  # programs ranked
    details: dict[str, Any] = field(default_factory=dict)

    def citations(self) -> list[str]:
        return [f"{self.table_id}#row={i}" for i in self.row_ids]


@dataclass(frozen=True, slots=True)
class TableHit:
    table_id: str
    score: float
    profile: TableProfile


class TableSource(Protocol):
    """An index's tables, as the structured route and the task head read them (either backend)."""

    def __len__(self) -> int: ...

    def profiles(self) -> list[TableProfile]: ...

    def table_ids(self, doc_id: str | None = None) -> list[str]: ...

    def search(self, question: str, k: int = 5) -> list[TableHit]: ...

    def runner(self, timeout_s: float = DEFAULT_TIMEOUT_S, row_limit: int = DEFAULT_ROW_LIMIT) -> SqlRunner: ...
