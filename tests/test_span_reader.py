"""The shipped span reader (int8 ONNX, no torch) on real held-out fixtures, and its artifact errors."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from amsrag.generate.base import ABSTAIN, Generator
from amsrag.generate.metrics import token_f1
from amsrag.generate.span_reader import (
    CARD_FILE,
    MODEL_FILE,
    ReaderArtifactError,
    SpanReader,
    SpanReaderGenerator,
    default_directory,
)
from amsrag.text.questions import is_yesno_question, question_options
from amsrag.types import Passage

FIXTURES = Path(__file__).parent / "fixtures" / "reader" / "cases.json"


@pytest.fixture(scope="module")
def reader() -> SpanReader:
    return SpanReader.load()


@pytest.fixture(scope="module")
def cases() -> dict[str, Any]:
    return json.loads(FIXTURES.read_text(encoding="utf-8"))


def _passages(rows: list[dict[str, str]]) -> list[Passage]:
    return [Passage(id=r["id"], title=r["title"], text=r["text"]) for r in rows]


@pytest.mark.parametrize("name", ["squad", "nq"])
def test_answers_a_known_question(reader: SpanReader, cases: dict[str, Any], name: str) -> None:
    case = cases[name]
    r = reader.read(case["question"], _passages(case["passages"]))
    assert token_f1(r.answer, case["answers"]) >= 0.5, (r.answer, case["answers"])
    assert r.kind == "span"
    assert r.passage_id == case["passages"][0]["id"]
    assert 0.0 <= r.confidence <= 1.0
    assert not r.abstained


def test_yes_no_question(reader: SpanReader, cases: dict[str, Any]) -> None:
    case = cases["yesno"]
    r = reader.read(case["question"], _passages(case["passages"]))
    assert r.kind == case["answers"][0]
    assert r.answer == case["answers"][0]


def test_picks_the_answer_passage_among_distractors(reader: SpanReader, cases: dict[str, Any]) -> None:
    case = cases["distractors"]
    ps = _passages(case["passages"])
    r = reader.read(case["question"], ps)
    assert r.passage_id == case["gold_id"]
    assert token_f1(r.answer, case["answers"]) >= 0.5, r.answer
    # the same passages in another order: the same answer (passages are read jointly, not first-come)
    r2 = reader.read(case["question"], ps[::-1])
    assert r2.answer == r.answer and r2.passage_id == r.passage_id


def test_abstains_without_the_answer(reader: SpanReader, cases: dict[str, Any]) -> None:
    case = cases["unanswerable"]
    gen = SpanReaderGenerator(reader)
    g = gen.generate(case["question"], _passages(case["passages"]))
    assert g.abstained
    assert g.answer == ABSTAIN
    assert g.citations == ()
    assert g.confidence is not None and g.confidence < reader.threshold


def test_generator_protocol(reader: SpanReader, cases: dict[str, Any]) -> None:
    gen = SpanReaderGenerator(reader)
    assert isinstance(gen, Generator)
    assert gen.name == "extractive" and gen.knows is False and gen.calibrated_confidence
    case = cases["squad"]
    ps = _passages(case["passages"])
    g = gen.generate(case["question"], ps)
    assert not g.abstained
    assert g.citations == (ps[0].id,)
    assert g.generator == "extractive" and g.ms > 0
    cb = gen.closed_book(case["question"])
    assert cb.abstained and cb.answer == ABSTAIN


def test_no_torch_at_run_time() -> None:
    code = ("import sys; from amsrag.generate.span_reader import SpanReader; from amsrag.types import Passage; "
            "r = SpanReader.load(); r.read('Who?', [Passage(id='a', title='', text='Ada wrote it.')]); "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "False"


def test_either_or_options() -> None:
    assert question_options("Which is older, the Eiffel Tower or Big Ben?") == ("Eiffel Tower", "Big Ben")
    assert question_options("Who was born first, Ada Lovelace or Charles Babbage?") == ("Ada Lovelace",
                                                                                         "Charles Babbage")
    assert question_options("Is the Eiffel Tower older than Big Ben?") is None
    assert question_options("What is the capital of France?") is None


def test_either_or_options_in_a_question_that_opens_like_yes_no() -> None:
    """2WikiMultihopQA writes "Was A or B born first?": two options, not a yes/no question."""
    assert question_options("Was Diego Lugano or John R. Gunn born first?") == ("Diego Lugano", "John R. Gunn")
    assert question_options("Was Ian Brennan (Footballer) or Jagnandan Singh born first?") == (
        "Ian Brennan (Footballer)", "Jagnandan Singh")
    assert question_options("Was Lincoln or Washington the first president?") == ("Lincoln", "Washington")
    assert not is_yesno_question("Was Diego Lugano or John R. Gunn born first?")
    assert question_options("Was the film made in France or Italy?") is None  # no comparative: a real yes/no
    assert question_options("Is coffee or tea better for you?") is None
    assert is_yesno_question("Are Medici and Senet both board games?")


def test_option_question_answers_with_an_option(reader: SpanReader) -> None:
    ps = [Passage(id="a", title="Tom Hanks", text="Tom Hanks (born July 9, 1956) is an American actor and filmmaker."),
          Passage(id="b", title="Leonardo DiCaprio",
                  text="Leonardo DiCaprio (born November 11, 1974) is an American actor.")]
    r = reader.read("Who was born first, Tom Hanks or Leonardo DiCaprio?", ps)
    assert r.kind == "option"
    assert r.answer in ("Tom Hanks", "Leonardo DiCaprio")


def test_empty_evidence_abstains(reader: SpanReader) -> None:
    r = reader.read("Who wrote Hamlet?", [])
    assert r.abstained and r.passage_id is None


def test_missing_artifact_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(ReaderArtifactError, match=CARD_FILE):
        SpanReader.load(tmp_path)
    shutil.copy(default_directory() / CARD_FILE, tmp_path / CARD_FILE)
    with pytest.raises(ReaderArtifactError, match=MODEL_FILE):
        SpanReader.load(tmp_path)


def test_corrupt_artifact_names_the_file(tmp_path: Path) -> None:
    shutil.copy(default_directory() / CARD_FILE, tmp_path / CARD_FILE)
    (tmp_path / MODEL_FILE).write_bytes(b"not an onnx model" * 10)
    with pytest.raises(ReaderArtifactError, match=MODEL_FILE):
        SpanReader.load(tmp_path)
    (tmp_path / CARD_FILE).write_text("{truncated", encoding="utf-8")
    with pytest.raises(ReaderArtifactError, match=CARD_FILE):
        SpanReader.load(tmp_path)


def test_model_that_does_not_match_its_card_names_both(tmp_path: Path) -> None:
    card = json.loads((default_directory() / CARD_FILE).read_text(encoding="utf-8"))
    card["artifact"]["sha256"] = "0" * 64
    (tmp_path / CARD_FILE).write_text(json.dumps(card), encoding="utf-8")
    shutil.copy(default_directory() / MODEL_FILE, tmp_path / MODEL_FILE)
    with pytest.raises(ReaderArtifactError, match="does not match its card"):
        SpanReader.load(tmp_path)


def test_configured_reader_folder_that_is_missing_is_a_clear_error(tmp_path: Path) -> None:
    from amsrag.config import GeneratorConfig
    from amsrag.generate import make_generator

    with pytest.raises(ReaderArtifactError, match=str(tmp_path / "nowhere")):
        make_generator(GeneratorConfig(reader=str(tmp_path / "nowhere")))


def test_pairs_read_side_by_side_cite_the_passage_holding_the_span(reader: SpanReader) -> None:
    filler = " ".join(["The committee met again in the spring and discussed the budget at length."] * 12)
    ps = [Passage(id="a", title="Harbour Bridge", text=filler + " The bridge was designed by Mira Olsen."),
          Passage(id="b", title="Mira Olsen", text="Mira Olsen was born in Bergen in 1931. " + filler),
          Passage(id="c", title="Budget", text=filler)]
    pairs = SpanReader(reader.infer, reader.maker.tok, {**reader.card, "windows": {
        **reader.card["windows"], "joint_pairs_of": 3, "joint_tokens": 512}})
    groups = pairs._joint_groups(reader.maker.question_ids("Where was the designer born?"),
                                 [len(ids) for ids, _ in reader.maker.encode_contexts([p.text for p in ps])])
    assert groups and all(len(g) == 2 for g in groups)
    r = pairs.read("Where was the designer of the Harbour Bridge born?", ps)
    texts = {p.id: f"{p.title}: {p.text}" for p in ps}
    for answer, pid in [(r.answer, r.passage_id), *((a.answer, a.passage_id) for a in r.alternatives)]:
        assert "||" not in answer and pid is not None and answer in texts[pid]  # never across two passages


def test_cli_reader_train_without_the_train_extra_says_so(tmp_path: Path) -> None:
    import importlib.util

    if importlib.util.find_spec("torch") is not None:
        pytest.skip("torch is installed here: `amsrag train reader train` would start training")
    proc = subprocess.run([sys.executable, "-m", "amsrag.cli", "train", "reader", "train", "--out",
                           str(tmp_path / "run")], capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0 and "train extra" in proc.stderr


@pytest.mark.slow
def test_cli_reader_evaluate_scores_the_shipped_reader(shared_data: Path, tmp_path: Path) -> None:
    report = tmp_path / "reader-eval.json"
    proc = subprocess.run([sys.executable, "-m", "amsrag.cli", "train", "reader", "evaluate", "--data",
                           str(shared_data), "--per-dataset", "3", "--json", "--report", str(report)],
                          capture_output=True, text=True, timeout=900, check=True)
    out = json.loads(proc.stdout)
    assert set(out["int8"]) >= {"gold", "mixed"} and out["int8"]["gold"]["all"]["n"] >= 6
    assert 0.0 <= out["int8"]["gold"]["all"]["f1"] <= 1.0 and out["load_seconds"] < 5
    assert json.loads(report.read_text())["records"]


def test_the_same_question_over_the_same_evidence_is_read_once(reader: SpanReader, cases: dict[str, Any]) -> None:
    gen = SpanReaderGenerator(reader, cache_size=2)
    case = cases["squad"]
    ps = _passages(case["passages"])
    first = gen.generate(case["question"], ps)
    assert gen.generate(case["question"], ps) is first
    edited = [Passage(id=ps[0].id, title=ps[0].title, text=ps[0].text + " Nothing else."), *ps[1:]]
    assert gen.generate(case["question"], edited) is not first  # same ids, other text: read again
    gen.generate("Who?", ps)
    assert gen.generate(case["question"], ps) is not first  # evicted (2 entries kept)


def test_cli_reader_evaluate_with_a_missing_model_names_the_file(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "amsrag.cli", "train", "reader", "evaluate", "--model",
                           str(tmp_path / "none"), "--data", str(tmp_path)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode != 0 and str(tmp_path / "none" / CARD_FILE) in proc.stderr
