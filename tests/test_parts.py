"""Questions that ask several things (issue 37, Deliver 2): cut into parts (`amsrag.decompose.parts`), each part
answered on its own with its citation (`Engine.ask`), on slices of the MkDocs and Cargo docs (tests/fixtures/docs,
their licences beside them)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from amsrag.decompose.parts import split_parts
from amsrag.ingest.documents import read_document

DOCS = Path(__file__).parent / "fixtures" / "docs"


@pytest.mark.parametrize(("question", "parts"), [
    ("What is the default site_dir, and what is the default dev_addr?",
     ("What is the default site_dir?", "What is the default dev_addr?")),
    ("Which command builds the site, and which one serves it?",
     ("Which command builds the site?", "Which command serves the site?")),
    ("Which environment variable sets the target directory, and which holds the package version?",
     ("Which environment variable sets the target directory?",
      "Which environment variable holds the package version?")),
    ("What are the default remote_branch and remote_name?",
     ("What is the default remote_branch?", "What is the default remote_name?")),
    ("What is the default min_search_length of the search plugin, and what is its default indexing strategy?",
     ("What is the default min_search_length of the search plugin?",
      "What is the search plugin's default indexing strategy?")),
    ("What file records the exact versions, and in what file is the manifest stored?",
     ("What file records the exact versions?", "In what file is the manifest stored?")),
    ("What is the default of http.timeout; what is the default of net.retry?",
     ("What is the default of http.timeout?", "What is the default of net.retry?")),
])
def test_a_question_asking_two_things_is_cut_into_parts_that_read_alone(question, parts) -> None:
    assert split_parts(question) == parts


@pytest.mark.parametrize("question", [
    "Are Ed Wood and Scott Derrickson of the same nationality?",  # relates the two: one reading
    "Which film came out first, Blind Shaft or The Mask Of Fu Manchu?",
    "What is the difference between build.target-dir and build.build-dir?",
    "Who helped repress the supporters of the Constitution and was later executed for it?",  # one subject, two verbs
    "Which city hosted the 1900 Olympics and is the capital of France?",
    "What Latin phrase, which translates as Out of many, one, is taken to mean One from Many?",  # a relative clause
    "When the congregation issues a call, who has to ratify it?",  # a subordinate clause
    "who is the father of genetics and what did he study",  # "he": the second part does not read alone
    "who invented the printing press and in what year",  # "in what year" is no question by itself
    "What effect does jet-lag and shift-work have on the human body?",  # hyphenated words, not setting names
    "What is the default site_dir?",
])
def test_a_question_asking_one_thing_stays_whole(question) -> None:
    assert split_parts(question) == (question,)


@pytest.mark.slow
def test_qa_questions_are_rarely_cut(shared_data) -> None:
    """Questions of the QA data sets ask one thing; the few the splitter cuts must be real two-part questions.
    Fewer than 1 % of each set's questions are cut."""
    def jsonl(path: str) -> list[str]:
        return [json.loads(x)["question"] for x in (shared_data / path).read_text("utf-8").splitlines() if x]

    sets = {"nq": jsonl("nq/flashrag_nq_test_sub1000.jsonl"),
            "triviaqa": jsonl("triviaqa/flashrag_triviaqa_test_sub1000.jsonl"),
            "popqa": jsonl("popqa/flashrag_popqa_test_sub1000.jsonl"),
            "hotpotqa": jsonl("hotpotqa/rpt_hotpot_distractor_validation_dev.jsonl"),
            "musique": jsonl("musique/migres_musique_200.jsonl"),
            "squad": [r["question"] for r in json.loads((shared_data / "squad/routerlens_squad_dev_4330.json")
                                                        .read_text("utf-8"))]}
    for name, questions in sets.items():
        cut = [q for q in questions if q and len(split_parts(q)) > 1]
        assert len(questions) >= 150 and len(cut) / len(questions) < 0.01, (name, cut)


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    from amsrag.pipeline import Engine
    from amsrag.store import EmbeddedIndex

    index = EmbeddedIndex.create(tmp_path_factory.mktemp("parts") / "index")
    for name, file in (("mkdocs", "configuration.md"), ("cargo", "config.md")):
        index.add(list(read_document(DOCS / name / file, f"{name}/{file}", "markdown")))
    with Engine(index) as e:
        yield e


QUESTION = "What is the default site_dir, and what is the default dev_addr?"


def test_each_part_is_answered_as_if_asked_alone(engine) -> None:
    result = engine.ask(QUESTION)
    assert [p.query for p in result.parts] == list(split_parts(QUESTION))
    for part in result.parts:
        alone = engine.ask(part.query)
        assert (part.answer, part.citations, part.abstained) == (alone.answer, alone.citations, alone.abstained)
        assert part.citations and part.quote is not None
    assert [p.answer.strip("'\"` ") for p in result.parts] == ["site", "127.0.0.1:8000"]
    assert result.answer == "; ".join(p.answer for p in result.parts) and not result.abstained
    assert result.citations == list(dict.fromkeys(c for p in result.parts for c in p.citations))
    out = result.to_dict()
    assert [p["query"] for p in out["parts"]] == [p.query for p in result.parts]
    assert out["trace"]["parts"] == [p.query for p in result.parts]
    assert out["trace"]["timings_ms"]["total"] >= max(p.trace.timings["total"] for p in result.parts)


def test_splitting_can_be_turned_off(engine) -> None:
    engine.config.decompose.split_parts = False
    try:
        result = engine.ask(QUESTION)
    finally:
        engine.config.decompose.split_parts = True
    assert result.parts == () and "parts" not in result.to_dict() and "parts" not in result.trace.to_dict()


def test_ask_prints_each_part_with_its_answer_and_quote(engine) -> None:
    from typer.testing import CliRunner

    from amsrag.cli.main import app

    res = CliRunner().invoke(app, ["ask", "--index", str(engine.index.path), "--no-log", QUESTION],
                             env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    first, second = split_parts(QUESTION)
    assert f"part 1: {first}" in res.output and f"part 2: {second}" in res.output
    assert res.output.count("quote: “") == 2
    assert "[mkdocs/configuration.md" in res.output
