"""iter_passages: index input from passage JSONL, text / Markdown files and folders, datasets; its errors."""

from __future__ import annotations

import gzip
import json
from importlib import resources
from pathlib import Path

import pytest

from amsrag.config import ChunkConfig
from amsrag.errors import InputError
from amsrag.ingest import detect_format, iter_passages, load_qa
from amsrag.types import passage_id_for

FIXTURES = Path(__file__).parent / "fixtures"


def write_jsonl(path: Path, rows: list) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


# ---------------------------------------------------------------- passage JSONL


def test_passage_jsonl(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "p.jsonl",
        [
            {"id": "a", "title": "A", "text": " Alpha text. ", "metadata": {"k": 1}},
            {"text": "No id here."},
            {"id": 7, "contents": '"Flash Title"\nFlash text.'},
            {"id": "d", "title": "Given", "contents": "Contents with a title."},
            {"id": "e", "text": "With doc.", "doc_id": "doc-9"},
        ],
    )
    got = list(iter_passages([path]))
    assert [p.id for p in got] == ["a", passage_id_for("", "No id here."), "7", "d", "e"]
    assert (got[0].title, got[0].text, got[0].metadata, got[0].doc_id) == ("A", "Alpha text.", {"k": 1}, "a")
    assert (got[2].title, got[2].text) == ("Flash Title", "Flash text.")
    assert (got[3].title, got[3].text) == ("Given", "Contents with a title.")
    assert got[4].doc_id == "doc-9"


def test_single_path_and_str_accepted(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "p.jsonl", [{"id": "a", "text": "x"}])
    assert [p.id for p in iter_passages(path)] == ["a"]
    assert [p.id for p in iter_passages(str(path))] == ["a"]


def test_gzipped_passage_jsonl(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        fh.write(json.dumps({"id": "g", "text": "zipped"}) + "\n")
    assert [p.text for p in iter_passages([path])] == ["zipped"]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"id": "x", "text": "ok"', r"bad\.jsonl:2: malformed JSON"),
        ('{"id": "x"}', r"bad\.jsonl:2: passage without text"),
        ('{"id": "x", "text": "   "}', r"bad\.jsonl:2: passage without text"),
        ('{"id": "x", "contents": ""}', r"bad\.jsonl:2: passage without text"),
        ('{"id": "x", "text": "t", "metadata": "m"}', r"bad\.jsonl:2: `metadata` must be a JSON object"),
        ('{"id": "x", "text": "t", "metadata": [1]}', r"bad\.jsonl:2: `metadata` must be a JSON object"),
        ('{"id": "", "text": "t"}', r"bad\.jsonl:2: `id` is empty"),
        ('{"id": [1], "text": "t"}', r"bad\.jsonl:2: `id` must be a string"),
        ('{"id": "x", "text": 5}', r"bad\.jsonl:2: `text` must be a string"),
        ('["x"]', r"bad\.jsonl:2: expected a JSON object"),
    ],
)
def test_passage_jsonl_errors(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"id": "first", "text": "fine"}\n' + line + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=message):
        list(iter_passages([path], fmt="jsonl"))


def test_duplicate_id_names_both_places(tmp_path: Path) -> None:
    one = write_jsonl(tmp_path / "one.jsonl", [{"id": "a", "text": "x"}, {"id": "b", "text": "y"}])
    two = write_jsonl(tmp_path / "two.jsonl", [{"id": "c", "text": "z"}, {"id": "b", "text": "y"}])
    with pytest.raises(InputError, match=r"duplicate passage id 'b': first at .*one\.jsonl:2, again at .*two\.jsonl:2"):
        list(iter_passages([one, two]))
    same_file = write_jsonl(tmp_path / "same.jsonl", [{"id": "a", "text": "x"}, {"id": "a", "text": "other"}])
    with pytest.raises(InputError, match=r"id 'a': first at .*same\.jsonl:1, again at .*same\.jsonl:2"):
        list(iter_passages([same_file]))


def test_identical_content_id_passages_are_yielded_once(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "p.jsonl", [{"text": "same"}, {"text": "same"}])
    assert len(list(iter_passages([path]))) == 1
    hotpot = FIXTURES / "hotpot_hipporag_original_3.json"
    corpus = FIXTURES / "hotpot_hipporag_corpus_2.json"
    assert len(list(iter_passages([hotpot, corpus]))) == len(load_qa(hotpot).passages)


def test_non_utf8_names_file_and_offset(tmp_path: Path) -> None:
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(b'{"text": "ok"}\n{"text": "caf\xe9"}\n')
    with pytest.raises(
        InputError, match=r"latin1\.jsonl: not UTF-8 text: invalid byte 0xe9 at byte offset 28 \(line 2\)"
    ):
        list(iter_passages([path]))
    txt = tmp_path / "notes.txt"
    txt.write_bytes(b"hello \xff world")
    with pytest.raises(InputError, match=r"notes\.txt: not UTF-8 text: invalid byte 0xff at byte offset 6"):
        list(iter_passages([txt]))


def test_missing_path_and_empty_inputs(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"missing\.jsonl: no such file or directory"):
        list(iter_passages([tmp_path / "missing.jsonl"]))
    with pytest.raises(InputError, match="no input paths"):
        list(iter_passages([]))
    (tmp_path / "empty").mkdir()
    write(tmp_path / "empty" / "image.png", "x")
    with pytest.raises(InputError, match=r"empty: no supported files in this directory"):
        list(iter_passages([tmp_path / "empty"]))
    with pytest.raises(InputError, match="unknown format 'odt'"):
        list(iter_passages([tmp_path], fmt="odt"))
    with pytest.raises(InputError, match="a directory can only be read as jsonl, text or markdown"):
        list(iter_passages([tmp_path / "empty"], fmt="hotpotqa"))


def test_bom_is_ignored(tmp_path: Path) -> None:
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps({"id": "b", "text": "x"}).encode())
    assert [p.id for p in iter_passages([path])] == ["b"]


# ---------------------------------------------------------------- text, markdown, folders


def test_folder_recursive_sorted_with_relative_doc_ids(tmp_path: Path) -> None:
    root = tmp_path / "docs"
    write(root / "b.txt", "Bee text. Second sentence.")
    write(root / "a" / "z.md", "# Zed\n\nZed body.\n\n## Part\n\nPart body.")
    write(root / "a" / "notes.jsonl", json.dumps({"id": "j1", "text": "json passage"}) + "\n")
    write(root / ".hidden" / "x.txt", "hidden")
    write(root / "ignored.csv", "a,b")
    got = list(iter_passages([root], chunking=ChunkConfig(max_tokens=64, overlap_tokens=0)))
    assert [p.id for p in got] == ["j1", "docs/a/z.md#0", "docs/a/z.md#1", "docs/b.txt#0"]
    zed, part, bee = got[1], got[2], got[3]
    assert (zed.title, zed.text, zed.doc_id) == ("Zed", "Zed body.", "docs/a/z.md")
    assert zed.metadata == {"source": "a/z.md", "type": "markdown", "chunk": 0, "section": "",  # inside its folder
                            "anchor": "zed"}  # the heading's GitHub slug
    assert (part.title, part.metadata["section"], part.metadata["chunk"]) == ("Zed › Part", "Part", 1)
    assert part.metadata["anchor"] == "part"
    assert (bee.title, bee.text, bee.doc_id) == ("b", "Bee text. Second sentence.", "docs/b.txt")


def test_folder_with_explicit_format_reads_only_its_files(tmp_path: Path) -> None:
    root = tmp_path / "kb"
    write(root / "a.txt", "Plain.")
    write(root / "b.md", "# B\n\nMark.")
    assert [p.id for p in iter_passages([root], fmt="text")] == ["kb/a.txt#0"]
    assert [p.id for p in iter_passages([root], fmt="markdown")] == ["kb/b.md#0"]
    with pytest.raises(InputError, match=r"no supported files .*\.jsonl"):
        list(iter_passages([root], fmt="jsonl"))


def test_single_file_doc_id_is_its_name(tmp_path: Path) -> None:
    path = write(tmp_path / "sub" / "guide.md", "Intro line.\n")
    [p] = list(iter_passages([path]))
    assert (p.id, p.doc_id, p.title) == ("guide.md#0", "guide.md", "guide")


def test_two_folders_never_collide_their_ids_are_namespaced_by_folder(tmp_path: Path) -> None:
    write(tmp_path / "one" / "index.md", "One.")
    write(tmp_path / "two" / "index.md", "Two.")
    got = list(iter_passages([tmp_path / "one", tmp_path / "two"]))
    assert [(p.id, p.doc_id) for p in got] == [("one/index.md#0", "one/index.md"), ("two/index.md#0", "two/index.md")]


def test_folders_of_the_same_name_must_be_named_apart(tmp_path: Path) -> None:
    write(tmp_path / "a" / "api" / "x.md", "A.")
    write(tmp_path / "b" / "api" / "x.md", "B.")
    with pytest.raises(InputError, match=r"both named 'api'.*other-api="):
        list(iter_passages([tmp_path / "a" / "api", tmp_path / "b" / "api"]))
    got = list(iter_passages([tmp_path / "a" / "api", f"node={tmp_path / 'b' / 'api'}"]))
    assert [p.id for p in got] == ["api/x.md#0", "node/x.md#0"]


def test_blank_files_are_refused_naming_the_file(tmp_path: Path) -> None:
    for name, content in (("e.txt", ""), ("w.md", " \n\t\n"), ("nul.txt", "\x00\x00\x01\x1f\n\x7f")):
        path = write(tmp_path / name, content)
        with pytest.raises(InputError, match=rf"{name}: this file has no text"):
            list(iter_passages([path]))
    assert list(iter_passages([write(tmp_path / "h.md", "# Only a heading\n")])) == []


def test_control_characters_are_removed_from_text(tmp_path: Path) -> None:
    [p] = list(iter_passages([write(tmp_path / "c.txt", "Clean\x00 text\x07 here.\n")]))
    assert p.text == "Clean text here."
    path = write_jsonl(tmp_path / "c.jsonl", [{"id": "x", "text": "\x00\x00 \x1f"}])
    with pytest.raises(InputError, match=r"c\.jsonl:1: passage without text"):
        list(iter_passages([path]))


def test_a_large_text_file_is_read_as_a_stream_of_pieces(tmp_path: Path) -> None:
    from amsrag.ingest.readers import iter_text_windows

    para = "Sentence one of a paragraph. Sentence two of it.\n\n"
    path = write(tmp_path / "big.txt", para * 20_000)
    windows = list(iter_text_windows(path, block_chars=10_000, window_chars=2_000))
    pieces = "".join(w if w is not None else "\0" for w in windows).split("\0")
    assert len(pieces) > 50 and max(len(t) for t in pieces) < 10_000 + 2 * len(para)
    assert max(len(w) for w in windows if w is not None) < 2_000 + len(para)
    assert "".join(pieces).replace("\n", "") == (para * 20_000).replace("\n", "")


def test_chunk_ids_are_stable(tmp_path: Path) -> None:
    text = " ".join(f"Sentence number {i} says something about topic {i % 7}." for i in range(60))
    path = write(tmp_path / "long.txt", text)
    config = ChunkConfig(max_tokens=48, overlap_tokens=12)
    first = [(p.id, p.text) for p in iter_passages([path], chunking=config)]
    again = [(p.id, p.text) for p in iter_passages([path], chunking=config)]
    assert first == again and len(first) > 5
    assert [pid for pid, _ in first] == [f"long.txt#{n}" for n in range(len(first))]


# ---------------------------------------------------------------- datasets as index input


def test_dataset_files_as_index_input() -> None:
    got = list(iter_passages([FIXTURES / "nq_oracle_5.jsonl.gz", FIXTURES / "flashrag_wiki_corpus_20.jsonl"]))
    assert len(got) == 25
    assert all(p.id == passage_id_for(p.title, p.text) for p in got)
    assert {p.metadata["source"] for p in got} == {"nq", "wiki"}


def test_flashrag_corpus_as_passage_jsonl_keeps_its_ids() -> None:
    got = list(iter_passages([FIXTURES / "flashrag_wiki_corpus_20.jsonl"], fmt="jsonl"))
    assert [p.id for p in got[:3]] == ["0", "1", "2"]
    assert got[0].title == "Evan Morris"


# ---------------------------------------------------------------- the bundled demo data


def demo_dir() -> Path:
    return Path(str(resources.files("amsrag") / "data" / "demo"))


def test_demo_data_loads_and_is_consistent() -> None:
    passages_path, questions_path = demo_dir() / "passages.jsonl.gz", demo_dir() / "questions.jsonl"
    assert detect_format(passages_path) == "jsonl"
    assert detect_format(questions_path) == "qa-jsonl"
    passages = list(iter_passages([passages_path]))
    assert 150 <= len(passages) <= 300
    assert all(p.id == passage_id_for(p.title, p.text) for p in passages)
    sources = {p.metadata["source"] for p in passages}
    assert sources == {"hotpotqa", "nq", "squad", "wiki"}
    qa = load_qa(questions_path)
    ids = {p.id for p in passages}
    assert len(qa.questions) == 28 and not qa.passages
    assert all(q.gold_passage_ids and set(q.gold_passage_ids) <= ids for q in qa.questions)
    hotpot = [q for q in qa.questions if q.dataset == "hotpotqa"]
    assert len(hotpot) == 12
    assert sum(q.qtype == "bridge" for q in hotpot) >= 4 and sum(q.qtype == "comparison" for q in hotpot) >= 2
    assert {q.complexity for q in qa.questions} == {"multi_hop", "one_hop"}
    assert (demo_dir() / "SOURCES.md").is_file()
