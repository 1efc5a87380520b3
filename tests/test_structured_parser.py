"""The semantic parser with the shipped artifact on small hand-made tables; candidate SQL against the allowlist;
the split rule; artifact errors."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import sqlglot
from sqlglot import exp

from amsrag.embed.encoder import MiniLMEncoder
from amsrag.errors import InputError
from amsrag.learn.tables.data import SqliteRunner, is_test_table, split_of
from amsrag.structured.denotation import denotation_match
from amsrag.structured.parser import SemanticParser, default_directory
from amsrag.structured.programs import candidate_programs
from amsrag.tables.base import ALLOWED_FUNCTIONS
from amsrag.tables.table import Table, memory_table

MEDALS = Table("medals", ("Nation", "Gold", "Silver", "Year"), (
    ("Brazil", "5", "2", "1990"),
    ("France", "3", "4", "1994"),
    ("Germany", "9", "1", "1998"),
    ("Brazil", "2", "2", "2002"),
    ("Italy", "4", "6", "2006"),
))
ELECTIONS = Table("elections", ("Year", "Candidate", "Party", "Votes"), (
    ("2001", "Anna Berg", "Green", "12,400"),
    ("2005", "Tom Lund", "Labour", "18,950"),
    ("2009", "Anna Berg", "Green", "15,100"),
    ("2013", "Eva Holm", "Liberal", "9,870"),
))


@pytest.fixture(scope="module")
def parser() -> SemanticParser:
    return SemanticParser.load()


@pytest.fixture(scope="module")
def encoder() -> MiniLMEncoder:
    return MiniLMEncoder()


def ask(parser: SemanticParser, encoder: MiniLMEncoder, table: Table, question: str) -> tuple[str, ...]:
    conn, profile = memory_table(table)
    answer = parser.answer(question, profile, SqliteRunner(conn), encoder)
    assert answer.candidates > 0 and answer.sql.startswith("SELECT")
    assert 0.0 <= answer.confidence <= 1.0
    return answer.answer


@pytest.mark.parametrize(("table", "question", "expected"), [
    (MEDALS, "how many times is brazil listed?", ["2"]),
    (MEDALS, "which nation won the most gold medals?", ["Germany"]),
    (MEDALS, "how many gold medals did france win?", ["3"]),
    (ELECTIONS, "which party did tom lund represent?", ["Labour"]),
    (ELECTIONS, "what were the votes for tom lund?", ["18,950"]),
    (ELECTIONS, "how many votes did eva holm receive?", ["9,870"]),  # a row's number, not COUNT(*) = 1
    (ELECTIONS, "who received the fewest votes?", ["Eva Holm"]),
])
def test_answers(parser: SemanticParser, encoder: MiniLMEncoder, table: Table, question: str,
                 expected: list[str]) -> None:
    got = ask(parser, encoder, table, question)
    assert denotation_match(got, expected), (question, got)


def test_answer_has_sql_rows_and_is_deterministic(parser: SemanticParser, encoder: MiniLMEncoder) -> None:
    conn, profile = memory_table(MEDALS)
    runner = SqliteRunner(conn)
    first = parser.answer("which nation won the most gold medals?", profile, runner, encoder)
    again = parser.answer("which nation won the most gold medals?", profile, runner, encoder)
    assert first == again
    assert first.row_ids == (2,)  # Germany's row
    assert first.citations() == ["medals#row=2"]
    assert first.program == "superlative"


def _functions(sql: str) -> set[str]:
    tree = sqlglot.parse_one(sql, read="sqlite")
    names = set()
    for node in tree.walk():
        if isinstance(node, exp.Anonymous):
            names.add(str(node.name).upper())
        elif isinstance(node, exp.Func) and not isinstance(node, exp.Connector | exp.Collate):
            names.add(node.sql_name().upper())
    return names


def test_candidates_use_only_allowed_sql() -> None:
    conn, profile = memory_table(ELECTIONS)
    runner = SqliteRunner(conn)
    questions = ("how many votes more did tom lund get than anna berg?", "who was the candidate after anna berg?",
                 "which party won the most elections?", "how many candidates got more than 10,000 votes?",
                 "what was the average number of votes?", "who came first, eva holm or tom lund?")
    for q in questions:
        _, programs = candidate_programs(q, profile, runner)
        assert 0 < len(programs) <= 300
        for p in programs:
            tree = sqlglot.parse_one(p.sql, read="sqlite")
            assert isinstance(tree, exp.Select), p.sql
            assert tree.args.get("limit") is not None, p.sql
            assert _functions(p.sql) <= ALLOWED_FUNCTIONS, (p.sql, _functions(p.sql) - ALLOWED_FUNCTIONS)
            runner.run(p.sql)  # every candidate is valid SQL for the layout


def test_mentions_use_the_runner_not_python_rows() -> None:
    big = Table("big", ("Name", "Team"), tuple((f"Player {i}", f"Team {i % 7}") for i in range(300)))
    conn, profile = memory_table(big)
    seen: list[str] = []

    class Recording(SqliteRunner):
        def run(self, sql: str, params=()):  # type: ignore[no-untyped-def]
            seen.append(sql)
            return super().run(sql, params)

    mentions, _ = candidate_programs("what team is player 211 on?", profile, Recording(conn))
    assert ("c0", "Player 211") in {(c.column.sql_name, c.value) for c in mentions.conditions}
    assert len(seen) == 1 and "LIMIT" in seen[0]


def test_split_rule_is_stable() -> None:
    assert is_test_table("csv/204-csv/590.csv") == (split_of("csv/204-csv/590.csv") == "test")
    share = sum(is_test_table(f"csv/20{i % 10}-csv/{i}.csv") for i in range(4000)) / 4000
    assert 0.17 < share < 0.23


def test_missing_artifact_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"parser\.json"):
        SemanticParser.load(tmp_path)


def test_corrupt_model_names_the_file(tmp_path: Path) -> None:
    for f in default_directory().iterdir():
        shutil.copy(f, tmp_path / f.name)
    card = json.loads((tmp_path / "parser.json").read_text())
    model = tmp_path / card["model_file"]
    model.write_bytes(model.read_bytes()[:100])
    with pytest.raises(InputError, match=card["model_file"]):
        SemanticParser.load(tmp_path)
    (tmp_path / "parser.json").write_text("{not json")
    with pytest.raises(InputError, match=r"parser\.json"):
        SemanticParser.load(tmp_path)
