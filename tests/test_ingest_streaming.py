"""Streaming parse (issue 39): a text file is read and chunked in bounded windows, with passages identical to
those of the whole-file reading (ids, texts, titles, metadata): on random texts cut in random windows, on the
fixture documents, and on real text made from the shared data (Wikipedia passages, Chinese reading
comprehension) in every line layout."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amsrag.config import ChunkConfig
from amsrag.embed.tokens import TokenCounter
from amsrag.ingest.chunking import iter_chunk_spans
from amsrag.ingest.documents import read_document
from amsrag.ingest.readers import clean_text, iter_text_windows, read_text
from amsrag.ingest.stream_chunking import iter_stream_chunks

FIXTURES = Path(__file__).parent / "fixtures"
SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
WIKI = SHARED / "flashrag" / "wiki_sample_corpus_1000.jsonl"
CMRC = SHARED / "cmrc2018" / "cmrc2018_dev_even.json"
COUNTER = TokenCounter()
# What sentence splitting and chunking turn on: stops, abbreviations, closing quotes, full-width stops,
# blank lines (hard boundaries), carriage returns, control characters, long words.
PIECES = ["Mr.", "U.S.", "e.g.", "3.5", "Ada", "wrote", "the", "notes", ".", "!", "?", "…", '"', "”", ")",
          "。", "！", "她", " ", "  ", "\n", "\n\n", "\n \n", "\t", "\r\n", "\r", "\x00", "x" * 70, "é"]


def _windows(text: str, sizes: list[int]) -> Iterator[str]:
    i, k = 0, 0
    while i < len(text):
        n = sizes[k % len(sizes)]
        yield text[i : i + n]
        i, k = i + n, k + 1


def _whole(text: str, config: ChunkConfig) -> list[tuple[tuple[int, int], str]]:
    return [((s, e), text[s:e]) for s, e in iter_chunk_spans(text, config, COUNTER)]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(PIECES), max_size=300), st.lists(st.integers(1, 400), min_size=1, max_size=8),
       st.sampled_from([16, 24, 48]), st.sampled_from([0, 5, 12]))
def test_streamed_chunks_equal_whole_text_chunks(parts: list[str], sizes: list[int], max_tokens: int,
                                                 overlap: int) -> None:
    text = clean_text("".join(parts).replace("\r\n", "\n").replace("\r", "\n"))
    config = ChunkConfig(max_tokens=max_tokens, overlap_tokens=overlap)
    assert list(iter_stream_chunks(_windows(text, sizes), config, COUNTER)) == _whole(text, config)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(4))
def test_a_sentence_longer_than_any_window_is_split_as_it_arrives(seed: int) -> None:
    rng = random.Random(seed)
    words = ["alpha", "Beta", "gamma,", "dé", "\n", "  ", "delta"]
    chosen = [rng.choice(words) for _ in range(rng.randint(4000, 9000))]
    chosen[rng.randrange(len(chosen))] = "x" * 9000  # a word longer than the tokenizer's word window
    text = " ".join(chosen)  # no stop: one sentence of 30-60 kB
    if seed % 2:
        text = text.replace(" delta ", ". Delta ", 3)  # and a few stops inside it
    config = ChunkConfig(max_tokens=rng.choice([32, 128, 512]), overlap_tokens=rng.choice([0, 16]))
    sizes = [rng.randint(500, 5000) for _ in range(5)]
    assert list(iter_stream_chunks(_windows(text, sizes), config, COUNTER)) == _whole(text, config)


# ---------------------------------------------------------------- files: today's whole-file reading


def _reference(path: Path, doc_id: str, config: ChunkConfig, block_chars: int = 1 << 18) -> list[tuple]:
    """The passages of the whole-file reading: the file read at once, its lines grouped into pieces that
    end at a blank line once they hold `block_chars` characters, each piece normalised and chunked whole."""
    text = read_text(path)
    lines = [line + "\n" for line in text.split("\n")]
    lines[-1] = lines[-1][:-1]
    pieces, current, size = [], [], 0
    for line in lines:
        if size >= block_chars and not line.strip():
            pieces.append("".join(current))
            current, size = [], 0
            continue
        current.append(line)
        size += len(line)
    if current:
        pieces.append("".join(current))
    out, n = [], 0
    for piece in pieces:
        piece = clean_text(piece.replace("\r\n", "\n").replace("\r", "\n"))
        for _, chunk in _whole(piece, config):
            out.append((f"{doc_id}#{n}", chunk, path.stem, {"source": path.name, "type": "text", "chunk": n,
                                                            "section": ""}))
            n += 1
    return out


def _streamed(path: Path, doc_id: str, config: ChunkConfig) -> list[tuple]:
    return [(p.id, p.text, p.title, p.metadata) for p in read_document(path, doc_id, "text", config, COUNTER,
                                                                       path.name)]


def _wiki_passages(n: int) -> list[str]:
    if not WIKI.exists():
        pytest.skip(f"{WIKI} is not there (../shared/data beside the checkout)")
    out = []
    with WIKI.open(encoding="utf-8") as fh:
        for line in fh:
            out.append(json.loads(line)["contents"].replace("\n", " "))
            if len(out) == n:
                break
    return out


LAYOUTS = {
    "a passage per line": lambda ps: "\n".join(ps) + "\n",
    "blank lines between passages": lambda ps: "\n\n".join(ps),
    "one line": lambda ps: " ".join(ps),
    "CRLF, no final newline": lambda ps: "\r\n".join(ps),
    "sentences per line, blank lines with spaces": lambda ps: "\n \t\n".join(p.replace(". ", ".\n") for p in ps),
}


@pytest.mark.slow
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_real_text_files_give_todays_passages(layout: str, tmp_path: Path) -> None:
    path = tmp_path / "wiki.txt"
    path.write_bytes(("\ufeff" + LAYOUTS[layout](_wiki_passages(1000))).encode("utf-8"))  # ~600 kB, with a BOM
    config = ChunkConfig()
    got = _streamed(path, "docs/wiki.txt", config)
    assert len(got) > 300
    assert got == _reference(path, "docs/wiki.txt", config)


def test_chinese_text_gives_todays_passages(tmp_path: Path) -> None:
    if not CMRC.exists():
        pytest.skip(f"{CMRC} is not there")
    data = json.loads(CMRC.read_text(encoding="utf-8"))["data"][:40]
    path = tmp_path / "cmrc.txt"
    path.write_text("\n".join(p["context"] for d in data for p in d["paragraphs"]), encoding="utf-8")
    config = ChunkConfig(max_tokens=64, overlap_tokens=16)
    got = _streamed(path, "cmrc.txt", config)
    assert len(got) > 50 and got == _reference(path, "cmrc.txt", config)


@pytest.mark.parametrize("path", sorted(FIXTURES.rglob("*.txt")), ids=lambda p: p.name)
def test_fixture_text_documents_give_todays_passages(path: Path) -> None:
    config = ChunkConfig(max_tokens=64, overlap_tokens=16)
    got = _streamed(path, path.name, config)
    assert got and got == _reference(path, path.name, config)


# ---------------------------------------------------------------- the windows of a text file


def _pieces(windows: Iterator[str | None]) -> list[str]:
    pieces = [""]
    for w in windows:
        if w is None:
            pieces.append("")
        else:
            pieces[-1] += w
    return [p for p in pieces if p]


@pytest.mark.parametrize("read_bytes", [1, 3, 7, 64, 1 << 20])
def test_text_windows_cut_lines_and_characters_anywhere_and_pieces_at_blank_lines(read_bytes: int,
                                                                                   tmp_path: Path) -> None:
    para = "Sentence one of a paragraph about Zürich — 苏黎世. Sentence two of it.\n"
    text = "\ufeff" + (para * 3 + "\n") * 400 + "   \n\n" + "x" * 5000 + "\n  "
    path = tmp_path / "big.txt"
    path.write_text(text, encoding="utf-8")
    pieces = _pieces(iter_text_windows(path, block_chars=10_000, window_chars=4096, read_bytes=read_bytes))
    body = text[1:]
    expected, current, size = [], [], 0
    for line in [*[line + "\n" for line in body.split("\n")][:-1], "  "]:
        if size >= 10_000 and not line.strip():
            expected.append("".join(current))
            current, size = [], 0
            continue
        current.append(line)
        size += len(line)
    expected.append("".join(current))
    assert len(pieces) > 5 and pieces == expected


def test_a_file_cut_inside_a_character_is_named(tmp_path: Path) -> None:
    from amsrag.errors import InputError

    path = tmp_path / "cut.txt"
    path.write_bytes("ab é".encode()[:-1])
    with pytest.raises(InputError, match=r"cut\.txt: not UTF-8 text: invalid byte 0xc3 at byte offset 3"):
        list(iter_text_windows(path, read_bytes=2))


# ---------------------------------------------------------------- ids: a document's chunks kept as one entry


def test_a_chunk_id_met_again_is_refused_with_both_places(tmp_path: Path) -> None:
    from amsrag.errors import InputError
    from amsrag.ingest import iter_passages
    from amsrag.ingest.api import IdRegistry
    from amsrag.types import Passage

    text = tmp_path / "a.txt"
    text.write_text(" ".join(f"Sentence {i} about Ada." for i in range(400)), encoding="utf-8")
    jsonl = tmp_path / "b.jsonl"
    jsonl.write_text(json.dumps({"id": "a.txt#2", "text": "Another passage."}) + "\n", encoding="utf-8")
    config = ChunkConfig(max_tokens=64, overlap_tokens=0)
    with pytest.raises(InputError, match=r"duplicate passage id 'a\.txt#2': first at .*a\.txt \(chunk 2\), "
                                         r"again at .*b\.jsonl:1"):
        list(iter_passages([text, jsonl], chunking=config))
    with pytest.raises(InputError, match=r"duplicate passage id 'a\.txt#2': first at .*b\.jsonl:1, "
                                         r"again at .*a\.txt \(chunk 2\)"):
        list(iter_passages([jsonl, text], chunking=config))
    with pytest.raises(InputError, match=r"duplicate passage id 'a\.txt#0': first at .*a\.txt \(chunk 0\), "
                                         r"again at .*a\.txt \(chunk 0\)"):
        list(iter_passages([text, text], chunking=config))
    registry = IdRegistry()  # a thousand chunks of one document, then ids near theirs
    for n in range(1000):
        assert registry.admit(Passage(id=f"d#{n}", text=f"t{n}", doc_id="d", metadata={"chunk": n}), f"d (chunk {n})")
    for fresh in ("d#1000", "d#01", "d#1x", "d", "e#3"):
        assert registry.admit(Passage(id=fresh, text="x"), "elsewhere")
    with pytest.raises(InputError, match=r"'d#999': first at d \(chunk 999\), again at elsewhere"):
        registry.admit(Passage(id="d#999", text="x"), "elsewhere")


# ---------------------------------------------------------------- JSON: a large array read item by item

REAL_JSON = ["morehopqa/alabnii_morehopqa_final_150samples.json", "hotpotqa/hipporag_hotpotqa_train_100.json",
             "musique/hipporag_musique_train_100_corpus.json", "strategyqa/aos_strategyqa_train.json",
             "squad/routerlens_squad_dev_4330.json", "2wikimultihopqa/migres_2wiki_train_500_decomp.json",
             "hotpotqa/hipporag_hotpotqa_train_100_corpus.json"]


def _stream_all_json(monkeypatch: pytest.MonkeyPatch) -> None:
    from amsrag.ingest import readers

    monkeypatch.setattr(readers, "STREAM_JSON_BYTES", 0)  # every .json array streamed, however small


@pytest.mark.parametrize("name", REAL_JSON)
def test_streamed_json_records_equal_the_parsed_file(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from amsrag.ingest.readers import first_record, iter_records

    path = SHARED / name
    if not path.exists():
        pytest.skip(f"{path} is not there")
    whole, first = list(iter_records(path)), first_record(path)
    _stream_all_json(monkeypatch)
    assert list(iter_records(path)) == whole and first_record(path) == first


@pytest.mark.parametrize("name", ["musique/hipporag_musique_train_100_corpus.json",
                                  "hotpotqa/hipporag_hotpotqa_train_100_corpus.json",
                                  "flashrag/wiki_sample_corpus_1000.jsonl"])
def test_a_streamed_corpus_gives_the_passages_of_the_loaded_one(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from amsrag.ingest import detect_format, iter_passages, load_qa

    path = SHARED / name
    if not path.exists():
        pytest.skip(f"{path} is not there")
    fmt = detect_format(path)
    assert fmt in ("corpus", "flashrag")
    loaded = load_qa(path, fmt).passages
    _stream_all_json(monkeypatch)
    assert list(iter_passages([path])) == loaded and len(loaded) > 100


def test_a_corpus_array_with_repeats_a_bom_and_gzip_streams_like_it_loads(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    import gzip

    from amsrag.ingest import iter_passages, load_qa

    rows = [{"title": f"T{i % 70}", "text": f"Passage {i % 70} about Ada.", "n": i * 0.5} for i in range(300)]
    rows.append({"title": "Empty", "text": "  "})
    plain = tmp_path / "corpus.json"
    plain.write_bytes(b"\xef\xbb\xbf" + json.dumps(rows, ensure_ascii=False).encode())
    packed = tmp_path / "packed.json.gz"
    packed.write_bytes(gzip.compress(json.dumps(rows).encode()))
    for path in (plain, packed):
        loaded = load_qa(path, "corpus").passages
        _stream_all_json(monkeypatch)
        assert list(iter_passages([path], "corpus")) == loaded and len(loaded) == 70
        monkeypatch.undo()


def test_a_large_malformed_json_array_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from amsrag.errors import InputError
    from amsrag.ingest import iter_passages

    path = tmp_path / "broken.json"
    path.write_text('[{"title": "a", "text": "fine"}, {"title": "b", "text": ', encoding="utf-8")
    _stream_all_json(monkeypatch)
    with pytest.raises(InputError, match=r"broken\.json: malformed JSON"):
        list(iter_passages([path], "corpus"))


def test_a_line_without_end_comes_in_bounded_windows(tmp_path: Path) -> None:
    path = tmp_path / "one-line.txt"
    text = " ".join(f"word{i} Ada" for i in range(40_000))  # 400 kB, no newline
    path.write_text(text, encoding="utf-8")
    windows = list(iter_text_windows(path, window_chars=4096, read_bytes=8192))
    assert None not in windows and "".join(w for w in windows if w is not None) == text
    assert len(windows) > 40 and max(len(w or "") for w in windows) <= 4096 + 8192
