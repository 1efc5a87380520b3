"""Format detection from extension and first record, and the errors of undetectable input."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from amsrag.errors import InputError
from amsrag.ingest import FORMATS, check_format, detect_format, load_qa

FIXTURES = Path(__file__).parent / "fixtures"

EXPECTED = {
    "hotpot_hf_dev_3.jsonl": "hotpotqa",
    "hotpot_migres_original_3.jsonl": "hotpotqa",
    "hotpot_hipporag_original_3.json": "hotpotqa",
    "hotpot_ircot_3.jsonl": "hotpotqa",
    "2wikimultihopqa_migres_3.json": "hotpotqa",
    "musique_migres_3.jsonl": "musique",
    "nq_oracle_5.jsonl.gz": "nq",
    "flashrag_nq_test_3.jsonl": "nq",
    "flashrag_triviaqa_test_3.jsonl": "nq",
    "flashrag_popqa_test_3.jsonl": "nq",
    "migres_odqa_nq_trivia_3.jsonl": "nq",
    "squad_v1.1_1article_2paragraphs.json": "squad",
    "squad_routerlens_5.json": "squad",
    "flashrag_wiki_corpus_20.jsonl": "flashrag",
    "honesty_hq_dev_5.jsonl": "questions",
    "retrievalqa_2.jsonl": "retrievalqa",
    "musique_hipporag_corpus_3.json": "corpus",
    "hotpot_hipporag_corpus_2.json": "corpus",
}


@pytest.mark.parametrize(("name", "fmt"), sorted(EXPECTED.items()))
def test_detect_fixture(name: str, fmt: str) -> None:
    assert detect_format(FIXTURES / name) == fmt


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_detect_passage_and_text_inputs(tmp_path: Path) -> None:
    assert detect_format(write_jsonl(tmp_path / "p.jsonl", [{"id": "a", "text": "x"}])) == "jsonl"
    assert detect_format(write_jsonl(tmp_path / "q.jsonl", [{"contents": "x", "title": "t"}])) == "jsonl"
    assert detect_format(write_jsonl(tmp_path / "qa.jsonl", [{"question": "q", "answers": ["a"]}])) == "qa-jsonl"
    gz = tmp_path / "p.jsonl.gz"
    with gzip.open(gz, "wt", encoding="utf-8") as fh:
        fh.write('\n{"text": "hello"}\n')  # a blank first line is skipped
    assert detect_format(gz) == "jsonl"
    for name, fmt in (("a.txt", "text"), ("b.md", "markdown"), ("c.markdown", "markdown")):
        (tmp_path / name).write_text("hello", encoding="utf-8")
        assert detect_format(tmp_path / name) == fmt


def test_detect_directories(tmp_path: Path) -> None:
    (tmp_path / "md").mkdir()
    (tmp_path / "md" / "a.md").write_text("# A", encoding="utf-8")
    (tmp_path / "md" / "sub").mkdir()
    (tmp_path / "md" / "sub" / "b.markdown").write_text("# B", encoding="utf-8")
    assert detect_format(tmp_path / "md") == "markdown"
    (tmp_path / "md" / "c.txt").write_text("c", encoding="utf-8")
    assert detect_format(tmp_path / "md") == "mixed"


@pytest.mark.parametrize(
    "name", ["adaptiverag_silver_labels_2.jsonl", "skr_labels_2.json", "adaptiverag_binary_labels_2.csv"]
)
def test_complexity_label_files_are_not_qa_data(name: str) -> None:
    with pytest.raises(InputError, match=r"complexity-label file.*not QA data"):
        detect_format(FIXTURES / name)
    with pytest.raises(InputError, match="complexity-label file"):
        load_qa(FIXTURES / name)


def test_undetectable_file_lists_the_formats(tmp_path: Path) -> None:
    odd = write_jsonl(tmp_path / "odd.jsonl", [{"foo": 1, "bar": 2}])
    with pytest.raises(InputError, match=r"odd\.jsonl: cannot detect the input format .*bar.*foo") as info:
        detect_format(odd)
    assert all(fmt in str(info.value) for fmt in FORMATS)
    odd_ext = tmp_path / "paper.xyz"
    odd_ext.write_bytes(b"%PDF")
    with pytest.raises(InputError, match=r"paper\.xyz: cannot detect .*unsupported extension \.xyz.*pdf.*hotpotqa"):
        detect_format(odd_ext)
    pdf = tmp_path / "paper.pdf"
    pdf.write_bytes(b"%PDF")
    assert detect_format(pdf) == "pdf"
    empty = tmp_path / "empty.json"
    empty.write_text("[]", encoding="utf-8")
    with pytest.raises(InputError, match="holds no records"):
        detect_format(empty)
    empty_jsonl = tmp_path / "empty.jsonl"  # an empty passage file: the caller reports an empty corpus
    empty_jsonl.write_text("\n\n", encoding="utf-8")
    assert detect_format(empty_jsonl) == "jsonl"
    scalar = write_jsonl(tmp_path / "nums.jsonl", [])
    scalar.write_text("[1, 2]\n", encoding="utf-8")
    with pytest.raises(InputError, match="JSON list, not an object"):
        detect_format(scalar)


def test_missing_path() -> None:
    with pytest.raises(InputError, match=r"nope\.jsonl: no such file or directory"):
        detect_format(Path("/definitely/not/here/nope.jsonl"))
    with pytest.raises(InputError, match="no such file or directory"):
        load_qa("/definitely/not/here/nope.jsonl")


def test_unknown_format_name() -> None:
    assert check_format("auto") == "auto"
    assert all(check_format(f) == f for f in FORMATS)
    with pytest.raises(InputError, match=r"unknown format 'hotpot'; use auto or one of: jsonl, text, markdown"):
        check_format("hotpot")
    with pytest.raises(InputError, match="unknown format"):
        load_qa(FIXTURES / "hotpot_hf_dev_3.jsonl", fmt="csv")


def test_malformed_first_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "ok"\n', encoding="utf-8")
    with pytest.raises(InputError, match=r"bad\.jsonl:1: malformed JSON"):
        detect_format(bad)


def test_dataset_format_on_a_directory(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="is a directory"):
        load_qa(FIXTURES, fmt="hotpotqa")
