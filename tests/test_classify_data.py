"""Label files, merging, dedup and splits of the classifier's training data."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from amsrag.errors import InputError
from amsrag.ingest.datasets import LabelledQuestion, load_silver3
from amsrag.learn.classifier.data import build_labelled_data, data_hash, merge, stratified_split
from amsrag.text.normalise import normalise_question

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_silver3_reads_and_maps(tmp_path: Path) -> None:
    p = _write(tmp_path / "s.jsonl", "\n".join(json.dumps(r) for r in [
        {"question": "Who wrote Hamlet?", "answer": "A", "dataset_name": "trivia"},
        {"question": "When was the publisher of Crux launched?", "answer": "A", "dataset_name": "musique"},
        {"question": "Who is X?", "answer": "B", "dataset_name": "nq"},
        {"question": "Where was the director of Y born?", "answer": "B", "dataset_name": "2wikimultihopqa"},
        {"question": "What is Z?", "answer": "C", "dataset_name": "squad"},
        {"question": "Who made W?", "answer": "C", "dataset_name": "mydocs", "hop": "one_hop"},
    ]) + "\n")
    rows = load_silver3(p)
    # the hop is the question's structure: a silver B on a two-hop data set stays multi_hop, a C on SQuAD one_hop
    assert [(r.three, r.hop, r.dataset) for r in rows] == [
        ("zero_hop", "one_hop", "triviaqa"), ("zero_hop", "multi_hop", "musique"), ("one_hop", "one_hop", "nq"),
        ("one_hop", "multi_hop", "2wikimultihopqa"), ("multi_hop", "one_hop", "squad"),
        ("multi_hop", "one_hop", "mydocs")]


@pytest.mark.parametrize(("line", "message"), [
    ('{"question": "q", "answer": "D", "dataset_name": "nq"}', "`answer` must be one of A, B, C"),
    ('{"question": "q", "answer": "A"', "not valid JSON"),
    ('{"question": "", "answer": "A", "dataset_name": "nq"}', "non-empty string"),
    ('["q", "A"]', "expected a JSON object"),
    ('{"question": "q", "answer": "A", "dataset_name": "mystery"}', "unknown `dataset_name`"),
])
def test_silver3_malformed_names_file_and_line(tmp_path: Path, line: str, message: str) -> None:
    good = json.dumps({"question": "fine", "answer": "B", "dataset_name": "nq"})
    p = _write(tmp_path / "labels.jsonl", f"{good}\n\n{line}\n")
    with pytest.raises(InputError) as exc:
        load_silver3(p)
    assert f"{p}:3:" in str(exc.value) and message in str(exc.value)


def test_missing_label_file_is_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="label file not found"):
        load_silver3(tmp_path / "nope.jsonl")


def test_normalise_question() -> None:
    assert normalise_question("  Who  WROTE “Hamlet”? ") == normalise_question("who wrote hamlet")


def _row(q: str, source: str, hop: str, three: str | None = None, dataset: str = "nq") -> LabelledQuestion:
    return LabelledQuestion(normalise_question(q), q, dataset, source, hop, three)  # type: ignore[arg-type]


def test_merge_keeps_the_dataset_hop() -> None:
    rows = merge([
        _row("Who wrote Hamlet?", "dataset", "one_hop"),
        _row("who wrote hamlet", "silver3", "one_hop", "zero_hop"),
        _row("When was A of B founded?", "dataset", "multi_hop", dataset="musique"),
        _row("when was a of b founded", "silver3", "one_hop", "one_hop", dataset="musique"),
        _row("When was C of D founded?", "silver3", "multi_hop", "zero_hop", dataset="hotpotqa"),
        _row("when was a of b founded", "dataset", "one_hop", dataset="squad"),
    ])
    by_key = {r.key: r for r in rows}
    assert len(rows) == 3
    assert by_key["who wrote hamlet"].three == "zero_hop" and by_key["who wrote hamlet"].hop == "one_hop"
    # a generator's "one retrieval sufficed" never turns a two-hop question into one_hop; the first data set wins
    a = by_key["when was a of b founded"]
    assert (a.hop, a.three, a.dataset, a.source) == ("multi_hop", "one_hop", "musique", "silver3")
    c = by_key["when was c of d founded"]  # only a silver row: it stands alone
    assert (c.hop, c.three) == ("multi_hop", "zero_hop")


def test_split_is_disjoint_stratified_and_deterministic() -> None:
    rows = merge([_row(f"question number {i} about thing {i % 7}", "dataset", "one_hop" if i % 3 else "multi_hop")
                  for i in range(1000)])
    a, b = stratified_split(rows, seed=13), stratified_split(rows, seed=13)
    assert a == b and data_hash(a, None, 13) == data_hash(b, None, 13)
    assert data_hash(stratified_split(rows, seed=14), None, 14) != data_hash(a, None, 13)
    keys = {s: {r.key for r in a if r.split == s} for s in ("train", "cal", "test")}
    assert not (keys["train"] & keys["cal"]) and not (keys["train"] & keys["test"]) and not (keys["cal"] & keys["test"])
    for hop in ("one_hop", "multi_hop"):
        n = sum(r.hop == hop for r in a)
        assert abs(sum(r.hop == hop and r.split == "test" for r in a) - n / 10) <= 1


@pytest.mark.slow
@pytest.mark.skipif(not SHARED_DATA.is_dir(), reason="needs ../shared/data")
def test_shared_data_assembly() -> None:
    from amsrag.classify import ComplexityClassifier
    from amsrag.evaluate.builder import evaluated_questions
    from amsrag.ingest.datasets import hop_of_dataset
    from amsrag.learn.decomposer.data import split_of

    data = build_labelled_data(SHARED_DATA, implicit=True)
    keys = [r.key for r in data.rows]
    assert len(keys) == len(set(keys))
    assert not set(keys) & evaluated_questions(SHARED_DATA) and data.held_out > 2000
    assert all(r.three is None and r.hop == (hop_of_dataset(r.dataset) or "multi_hop") for r in data.rows)
    counts = data.counts()
    assert len(counts["test/dataset"]) == 8 and counts["test/hop"]["multi_hop"] > 1000
    implicit = [r for r in data.rows if r.dataset == "strategyqa"]
    assert len(implicit) > 1000 and all(split_of(r.question) == "train" for r in implicit)  # the router's list is not
    # the shipped artifact was trained on exactly these rows
    assert ComplexityClassifier.load().meta["training_data"]["sha256"] == data.sha256
