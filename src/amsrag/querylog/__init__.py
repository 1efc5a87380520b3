"""The query log (opt-in): one row per answered question, the source of the monitor report and the review
queue. SQLite in an embedded index's directory, a table in a PostgreSQL index's database."""

from amsrag.querylog.base import QueryLog
from amsrag.querylog.entry import QueryLogEntry, Redactor, entry_from_answer, secrets_of
from amsrag.querylog.open import open_query_log, query_log_for_index
from amsrag.querylog.sqlite import SqliteQueryLog
from amsrag.querylog.stats import summarise

__all__ = ["QueryLog", "QueryLogEntry", "Redactor", "SqliteQueryLog", "entry_from_answer", "open_query_log",
           "query_log_for_index", "secrets_of", "summarise"]
