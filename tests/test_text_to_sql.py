"""Text-to-SQL for LLM generators: a scripted stand-in model (the LLM is outside the product); the guard
and the runner are the real ones."""

from __future__ import annotations

import pytest

from amsrag.store.embedded.tables import TableStore
from amsrag.structured.text_to_sql import extract_sql, llm_answer, sql_prompt
from amsrag.tables.base import SqlRefused
from amsrag.tables.table import Table


@pytest.fixture()
def store(tmp_path):
    s = TableStore.open(tmp_path / "tables.sqlite", create=True)
    s.add([Table("medals", ("Nation", "Gold"), (("Norway", "16"), ("France", "5"), ("Italy", "0")))])
    yield s
    s.close()


def test_the_model_sees_the_schema_and_its_select_runs_through_the_guard(store):
    profile = store.profile("medals")
    seen = []

    def model(prompt: str) -> str:
        seen.append(prompt)
        return f"```sql\nSELECT c0 FROM {profile.sql_name} ORDER BY c1_num DESC LIMIT 1;\n```"

    a = llm_answer("Which nation won the most gold?", profile, store.runner(), model)
    assert a.answer == ("Norway",) and a.program == "llm" and a.sql.startswith("SELECT")
    assert profile.sql_name in seen[0] and "Norway" in seen[0] and "c1_num" in seen[0]


def test_a_model_that_writes_is_refused_and_nothing_changes(store):
    profile = store.profile("medals")
    with pytest.raises(SqlRefused):
        llm_answer("Drop it", profile, store.runner(),
                   lambda p: f"SELECT c0 FROM {profile.sql_name}; DROP TABLE {profile.sql_name}")
    assert store.profile("medals").n_rows == 3 and len(store.runner().run(
        f"SELECT c0 FROM {profile.sql_name}").rows) == 3
    with pytest.raises(Exception, match="no SELECT"):
        extract_sql("I cannot help with that.")
    assert "Question: q" in sql_prompt("q", profile, [])
