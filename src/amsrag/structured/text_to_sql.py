"""Text-to-SQL with an LLM generator: the table's schema and a few sample rows in the prompt, one SELECT back.

The statement goes through the same guarded runner as the parser's programs (a single read-only SELECT
over the allowed tables, allowlisted functions, a row limit and a timeout), so a model that writes
something else gets a refusal, never a write. The answer is the first column of the result.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from amsrag.errors import InputError
from amsrag.tables.base import SqlRunner, StructuredAnswer
from amsrag.tables.table import TableProfile

SAMPLE_ROWS = 3
LLM_CONFIDENCE = 0.5  # an LLM's SQL carries no calibrated confidence; the route's gate sees this constant
_FENCED = re.compile(r"```(?:sql)?\s*(.+?)```", re.S | re.I)
_SELECT = re.compile(r"^\s*(SELECT|WITH)\b.+", re.S | re.I | re.M)  # at a line's start: not "with" in prose


def sql_prompt(question: str, profile: TableProfile, samples: list[tuple[object, ...]]) -> str:
    cols = "\n".join(f"- {c.sql_name} (text) and {c.num_name} (its number, or NULL): \"{c.name}\", {c.type}"
                     + (f", unit {c.unit}" if c.unit else "") for c in profile.columns)
    rows = "\n".join(" | ".join(str(v) for v in r) for r in samples)
    title = f" ({profile.title})" if profile.title else ""
    names = ", ".join(c.sql_name for c in profile.columns)
    return (f"Write one SQLite SELECT statement over the table {profile.sql_name} that answers the question.\n"
            f"Table {profile.sql_name}{title}, {profile.n_rows} rows, columns row_id (row order) and:\n{cols}\n"
            f"Sample rows ({names}):\n{rows}\nCompare numbers on the _num columns. Return only the SQL.\n"
            f"Question: {question}\nSQL:")


def extract_sql(reply: str) -> str:
    """The statement in a model's reply (a fenced block, or from the first line starting SELECT / WITH on)."""
    m = _FENCED.search(reply)
    text = m.group(1) if m else reply
    s = _SELECT.search(text)
    if s is None:
        raise InputError(f"the model returned no SELECT statement: {reply[:200]!r}")
    return s.group(0).strip().rstrip(";").strip()


def llm_answer(question: str, profile: TableProfile, runner: SqlRunner,
               complete: Callable[[str], str]) -> StructuredAnswer:
    cols = ", ".join(c.sql_name for c in profile.columns)
    samples = list(runner.run(f"SELECT {cols} FROM {profile.sql_name} ORDER BY row_id LIMIT {SAMPLE_ROWS}").rows)
    sql = extract_sql(complete(sql_prompt(question, profile, samples)))
    rows = runner.run(sql)
    values = tuple(str(r[0]) for r in rows.rows[:10] if r and r[0] is not None)
    return StructuredAnswer(profile.table_id, values, sql, (), LLM_CONFIDENCE if values else 0.0, "llm", 1,
                            {"truncated": rows.truncated})
