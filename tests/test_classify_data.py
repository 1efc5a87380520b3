"""Label files, merging, dedup and splits of the classifier's training data."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from amsrag.errors import InputError
from amsrag.ingest.datasets import LabelledQuestion, load_silver2, load_silver3, normalise_question
from amsrag.learn.classifier.data import build_labelled_data, data_hash, merge, stratified_split

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_silver3_reads_and_maps(tmp_path: Path) -> None:
    p = _write(tmp_path / "s.jsonl", "\n".join(json.dumps(r) for r in [
        {"question": "Who wrote Hamlet?", "answer": "A", "dataset_name": "trivia"},
        {"question": "When was the publisher of Crux launched?", "answer": "A", "dataset_name": "musique"},
        {"question": "Who is X?", "answer": "B", "dataset_name": "nq"},
    ]) + "\n")
    rows = load_silver3(p)
    assert [(r.three, r.hop, r.dataset) for r in rows] == [
        ("zero_hop", "one_hop", "triviaqa"), ("zero_hop", "multi_hop", "musique"), ("one_hop", "one_hop", "nq")]


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


def test_silver2_reads_and_rejects(tmp_path: Path) -> None:
    ok = _write(tmp_path / "ok.csv", "label,question,id\nB,who is x,single_nq_train_0\nC,When was A of B?,2hop__1_2\n")
    rows = load_silver2(ok)
    assert [(r.hop, r.dataset) for r in rows] == [("one_hop", "nq"), ("multi_hop", "musique")]
    bad = _write(tmp_path / "bad.csv", "label,question,id\nB,who is x,single_nq_train_0\nA,what?,x\n")
    with pytest.raises(InputError, match=rf"{bad}:3: `label` must be B or C"):
        load_silver2(bad)
    short = _write(tmp_path / "short.csv", "label,question,id\nB\n")
    with pytest.raises(InputError, match=rf"{short}:2: "):
        load_silver2(short)
    header = _write(tmp_path / "header.csv", "lab,q\nB,x\n")
    with pytest.raises(InputError, match=rf"{header}:1: header"):
        load_silver2(header)


def test_missing_label_file_is_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="label file not found"):
        load_silver3(tmp_path / "nope.jsonl")


def test_normalise_question() -> None:
    assert normalise_question("  Who  WROTE “Hamlet”? ") == normalise_question("who wrote hamlet")


def _row(q: str, source: str, hop: str, three: str | None = None, dataset: str = "nq") -> LabelledQuestion:
    return LabelledQuestion(normalise_question(q), q, dataset, source, hop, three)  # type: ignore[arg-type]


def test_merge_precedence() -> None:
    rows = merge([
        _row("Who wrote Hamlet?", "dataset", "one_hop"),
        _row("who wrote hamlet", "silver3", "one_hop", "zero_hop"),
        _row("When was A of B founded?", "dataset", "multi_hop", dataset="musique"),
        _row("when was a of b founded", "silver2", "one_hop", dataset="musique"),
        _row("When was C of D founded?", "silver3", "multi_hop", "zero_hop", dataset="hotpotqa"),
        _row("When was C of D founded", "silver2", "one_hop", dataset="hotpotqa"),
    ])
    by_key = {r.key: r for r in rows}
    assert len(rows) == 3
    assert by_key["who wrote hamlet"].source == "silver3"
    assert by_key["when was a of b founded"].hop == "one_hop"  # silver B beats the dataset's multi_hop
    assert by_key["when was c of d founded"].hop == "one_hop" and by_key["when was c of d founded"].three == "zero_hop"


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
    data = build_labelled_data(SHARED_DATA)
    keys = [r.key for r in data.rows]
    assert len(keys) == len(set(keys))
    counts = data.counts()
    assert counts["test/silver3"]["zero_hop"] > 20 and counts["test/hop"]["multi_hop"] > 1000
    assert all(r.three is None for r in data.rows if r.source != "silver3")
    # the shipped artifact was trained on exactly these rows
    from amsrag.classify import ComplexityClassifier

    assert ComplexityClassifier.load().meta["training_data"]["sha256"] == data.sha256
